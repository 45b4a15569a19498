import sys
import threading
import types
import unittest
from unittest import mock

import gpuguard
from gpuguard import torchhook

from .support import TmpTestCase, clean_env, wait_until


class OutOfMemoryError(RuntimeError):
    pass


def fake_torch(initialized=True, observer=True, attach_error=None):
    """A stand-in for the parts of torch the hook touches."""
    torch = types.ModuleType("torch")
    torch.observers = []
    torch.OutOfMemoryError = OutOfMemoryError
    torch.cuda = types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError,
                                       is_initialized=lambda: initialized)
    torch._C = types.SimpleNamespace()
    if observer:
        def attach(fn):
            if attach_error:
                raise attach_error
            torch.observers.append(fn)
        torch._C._cuda_attach_out_of_memory_observer = attach
    return torch


class TorchHookTest(TmpTestCase):
    def setUp(self):
        super().setUp()
        patches = [
            mock.patch.object(torchhook, "_hook", torchhook._Hook()),
            mock.patch.object(sys, "excepthook", self.record_sys),
            mock.patch.object(threading, "excepthook", self.record_thread),
        ]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)
        self.uncaught = []
        self.srv = self.fake_server()
        env = clean_env(GPUGUARD_NAME="srv", GPUGUARD_SOCKET=self.srv.path)
        env.start()
        self.addCleanup(env.stop)

    def record_sys(self, t, e, tb):
        self.uncaught.append(e)

    def record_thread(self, args):
        self.uncaught.append(args.exc_value)

    def install(self, torch, **kw):
        with mock.patch.dict(sys.modules, {"torch": torch}):
            return gpuguard.install_torch_oom_hook(**kw)

    def test_without_torch(self):
        self.assertFalse(self.install(None))  # None in sys.modules: import fails
        self.assertEqual(sys.excepthook, self.record_sys)

    def test_observer_reports_once(self):
        torch = fake_torch()
        self.assertTrue(self.install(torch))
        self.assertTrue(self.install(torch))  # idempotent
        self.assertEqual(len(torch.observers), 1)
        torch.observers[0](0, 2 << 30, 14 << 30, 1 << 30)
        torch.observers[0](0, 1 << 30, 14 << 30, 1 << 30)  # a retry with less scratch
        self.assertEqual(len(self.srv.oom), 1)
        self.assertIn("device 0", self.srv.oom[0])
        self.assertIn(str(2 << 30), self.srv.oom[0])
        # The excepthook does not report again, and chains.
        e = OutOfMemoryError("CUDA out of memory")
        sys.excepthook(OutOfMemoryError, e, None)
        self.assertEqual(self.uncaught, [e])
        self.assertEqual(len(self.srv.oom), 1)

    def test_observer_never_raises(self):
        torch = fake_torch()
        self.install(torch)
        with mock.patch.object(torchhook._client, "report_oom", side_effect=RuntimeError("x")):
            torch.observers[0](0, 1, 2, 3)  # must not raise into the allocator

    def test_not_eager_reports_only_uncaught(self):
        torch = fake_torch()
        self.install(torch, eager=False)
        torch.observers[0](1, 4096, 10, 20)
        self.assertEqual(self.srv.oom, [])
        sys.excepthook(ValueError, ValueError("unrelated"), None)
        self.assertEqual(self.srv.oom, [])
        e = OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 KiB")
        sys.excepthook(OutOfMemoryError, e, None)
        self.assertEqual(len(self.srv.oom), 1)
        self.assertIn("device 1", self.srv.oom[0])  # the observer's detail
        self.assertEqual(self.uncaught[-1], e)

    def test_excepthook_without_observer(self):
        torch = fake_torch(initialized=False)
        self.install(torch)
        self.assertEqual(torch.observers, [])  # would initialise CUDA
        try:
            try:
                raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")  # older torch
            except RuntimeError as inner:
                raise ValueError("request failed") from inner
        except ValueError as e:
            sys.excepthook(ValueError, e, None)
        self.assertEqual(len(self.srv.oom), 1)
        self.assertIn("out of memory", self.srv.oom[0])

    def test_thread_excepthook(self):
        self.install(fake_torch(observer=False))
        t = threading.Thread(target=lambda: (_ for _ in ()).throw(OutOfMemoryError("CUDA out of memory")))
        t.start()
        t.join(60)
        wait_until(lambda: len(self.srv.oom) == 1, what="oom report")
        # The hook reports, then calls the previous hook (which records):
        # wait on the list that is read below, not only on the report.
        wait_until(lambda: self.uncaught, what="the previous hook called")
        self.assertIsInstance(self.uncaught[0], OutOfMemoryError)

    def test_observer_forced_and_attach_errors(self):
        torch = fake_torch(initialized=False)
        self.install(torch, observer=True)
        self.assertEqual(len(torch.observers), 1)
        with mock.patch.object(torchhook, "_hook", torchhook._Hook()):
            err = fake_torch(attach_error=RuntimeError("cudaMallocAsync does not yet support it"))
            self.assertTrue(self.install(err))
            self.assertFalse(torchhook._hook.observer)

    def test_unsupervised_is_quiet(self):
        torch = fake_torch()
        with clean_env():
            self.assertTrue(self.install(torch))
            torch.observers[0](0, 1, 2, 3)
            sys.excepthook(OutOfMemoryError, OutOfMemoryError("x"), None)
        self.assertEqual(self.srv.oom, [])


if __name__ == "__main__":
    unittest.main()
