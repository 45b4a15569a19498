import os
import signal
import threading
import unittest
from unittest import mock

import gpuguard
from gpuguard import watch as ggwatch

from .support import TmpTestCase, clean_env, wait_until, write_state

SIG = signal.SIGUSR1


class Recorder(object):
    def __init__(self):
        self.profiles = []
        self.threads = []
        self.lock = threading.Lock()

    def __call__(self, p):
        with self.lock:
            self.profiles.append(p)
            self.threads.append(threading.current_thread())

    def seqs(self):
        with self.lock:
            return [p.seq for p in self.profiles]


class WatchTest(TmpTestCase):
    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.dir, "state.json")
        write_state(self.state, 1, 0, "fp16", {"MAX_BATCH": "32"}, "start")
        p = mock.patch.multiple(ggwatch, BACKOFF_MIN=0.01, BACKOFF_MAX=0.05)
        p.start()
        self.addCleanup(p.stop)

    def env(self, sock=None):
        values = dict(GPUGUARD_NAME="srv", GPUGUARD_STATE=self.state, GPUGUARD_LEVELS="3")
        if sock:
            values["GPUGUARD_SOCKET"] = sock
        return clean_env(**values)

    def watch(self, rec, **kw):
        w = gpuguard.on_change(rec, **kw)
        self.addCleanup(w.stop)
        return w

    def test_subscribe_events(self):
        srv = self.fake_server()
        rec = Recorder()
        with self.env(srv.path):
            w = self.watch(rec)
            self.assertTrue(w.wait_subscribed(5))
            self.assertEqual(len(srv.of_type("subscribe")), 1)
            self.assertEqual(w.current.name, "fp16")
            srv.publish(2, 1, "int8", {"MAX_BATCH": "16"}, "watermark 0.93 > 0.90")
            wait_until(lambda: rec.seqs() == [2], what="event 2")
            p = rec.profiles[0]
            self.assertEqual((p.name, p.level, p.levels, p.env, p.reason),
                             ("int8", 1, 3, {"MAX_BATCH": "16"}, "watermark 0.93 > 0.90"))
            self.assertEqual(p.get("MAX_BATCH"), "16")
            self.assertIsNot(rec.threads[0], threading.main_thread())
            # Replays and older events are dropped; the next change arrives.
            srv.publish(2, 1, "int8")
            srv.publish(1, 0, "fp16")
            srv.publish(3, 2, "int4")
            wait_until(lambda: rec.seqs() == [2, 3], what="event 3")
            self.assertEqual(w.current.name, "int4")

    def test_event_after_signal_delivered_once(self):
        # gpuguard writes the state, signals, then publishes: while
        # subscribed, the handler leaves the delivery to the subscription.
        srv = self.fake_server()
        rec = Recorder()
        with self.env(srv.path):
            w = self.watch(rec)
            self.assertTrue(w.wait_subscribed(5))
            self.assertTrue(w.signal_installed)
            for seq, prof in [(2, "int8"), (3, "int4")]:
                write_state(self.state, seq, seq - 1, prof)
                os.kill(os.getpid(), SIG)
                srv.publish(seq, seq - 1, prof)
            wait_until(lambda: rec.seqs() == [2, 3], what=lambda: "two changes, got %r" % (rec.seqs(),))
            self.assertEqual(rec.seqs(), [2, 3])

    def started_env(self, sock=None, profile="fp16", level="0"):
        values = dict(GPUGUARD_NAME="srv", GPUGUARD_STATE=self.state, GPUGUARD_LEVELS="3",
                      GPUGUARD_PROFILE=profile, GPUGUARD_LEVEL=level)
        if sock:
            values["GPUGUARD_SOCKET"] = sock
        return clean_env(**values)

    def test_change_before_on_change_delivered_once(self):
        # The process started in fp16; a step to int8 came before on_change
        # (gpuguard skipped the signal: no handler yet). on_change delivers
        # it before it returns, once: neither the late signal, the
        # subscription's re-read nor a replayed event deliver it again.
        for sock in (False, True):
            with self.subTest(socket=sock):
                write_state(self.state, 1, 0, "fp16", {"MAX_BATCH": "32"}, "start")
                srv = self.fake_server("s%d.sock" % sock) if sock else None
                write_state(self.state, 2, 1, "int8", {"MAX_BATCH": "16"}, "manual step down")
                rec = Recorder()
                with self.started_env(srv.path if srv else None):
                    w = self.watch(rec)
                    self.assertEqual(rec.seqs(), [2])
                    self.assertIs(rec.threads[0], threading.main_thread())
                    self.assertEqual((w.current.name, rec.profiles[0].get("MAX_BATCH")), ("int8", "16"))
                    if srv:
                        self.assertTrue(w.wait_subscribed(5))
                        srv.publish(2, 1, "int8")
                    os.kill(os.getpid(), SIG)
                    write_state(self.state, 3, 2, "int4")
                    os.kill(os.getpid(), SIG)
                    if srv:
                        srv.publish(3, 2, "int4")
                    wait_until(lambda: rec.seqs() == [2, 3], what=lambda: "changes 2, 3; got %r" % (rec.seqs(),))
                    w.stop()
                    self.assertEqual(rec.seqs(), [2, 3])

    def test_no_missed_change(self):
        # The state file still holds the profile the process started in
        # (seq 1), or it went down and back up (seq 3): nothing to deliver.
        for seq in (1, 3):
            with self.subTest(seq=seq):
                write_state(self.state, seq, 0, "fp16")
                rec = Recorder()
                with self.started_env():
                    w = self.watch(rec)
                    self.assertEqual(rec.seqs(), [])
                    self.assertEqual((w.current.name, w.current.seq), ("fp16", seq))
                    write_state(self.state, seq + 1, 1, "int8")
                    os.kill(os.getpid(), SIG)
                    wait_until(lambda: rec.seqs() == [seq + 1], what="the next change")
                    w.stop()

    def test_restarted_in_a_lower_profile(self):
        # A process restarted in int8 (GPUGUARD_PROFILE=int8) finds int8 in
        # the state file: that is where it started, not a change.
        write_state(self.state, 4, 1, "int8")
        rec = Recorder()
        with self.started_env(profile="int8", level="1"):
            w = self.watch(rec)
            self.assertEqual(rec.seqs(), [])
            self.assertEqual(w.current.name, "int8")

    def test_reconnect_and_signal_fallback(self):
        srv = self.fake_server()
        rec = Recorder()
        with self.env(srv.path):
            w = self.watch(rec)
            self.assertTrue(w.wait_subscribed(5))
            srv.publish(2, 1, "int8")
            wait_until(lambda: rec.seqs() == [2], what="event 2")

            # gpuguard's socket goes away: the signal path takes over.
            srv.close()
            wait_until(lambda: not w.subscribed, what="unsubscribed")
            write_state(self.state, 3, 2, "int4")
            os.kill(os.getpid(), SIG)
            wait_until(lambda: rec.seqs() == [2, 3], what="change 3 via the signal")
            self.assertIs(rec.threads[-1], threading.main_thread())

            # A change made with no signal while disconnected is found in
            # the state file after resubscribing; a replayed event is not
            # delivered again.
            write_state(self.state, 4, 1, "int8")
            srv2 = self.fake_server()  # same path
            wait_until(lambda: w.subscribed, what="resubscribed")
            wait_until(lambda: rec.seqs() == [2, 3, 4], what="change 4 from the state file")
            srv2.publish(4, 1, "int8")
            srv2.publish(3, 2, "int4")
            srv2.publish(5, 0, "fp16")
            wait_until(lambda: rec.seqs() == [2, 3, 4, 5], what="event 5")

    def test_dropped_subscriber_resubscribes(self):
        srv = self.fake_server()
        rec = Recorder()
        with self.env(srv.path):
            w = self.watch(rec, signum=None)
            self.assertTrue(w.wait_subscribed(5))
            write_state(self.state, 2, 1, "int8")  # the event for it is lost
            srv.drop_subscribers("subscriber fell behind (64 events queued) and was dropped")
            wait_until(lambda: len(srv.of_type("subscribe")) == 2, what="resubscribe")
            wait_until(lambda: rec.seqs() == [2], what="change 2 from the state file")
            wait_until(lambda: w.subscribed)
            srv.publish(3, 2, "int4")
            wait_until(lambda: rec.seqs() == [2, 3], what="event 3")

    def test_signal_only_without_socket(self):
        rec = Recorder()
        with self.env():
            w = self.watch(rec)
            self.assertTrue(w.signal_installed)
            self.assertFalse(w.wait_subscribed(0))
            os.kill(os.getpid(), SIG)  # nothing changed: nothing delivered
            write_state(self.state, 2, 1, "int8", {"MAX_BATCH": "16"})
            os.kill(os.getpid(), SIG)
            wait_until(lambda: rec.seqs() == [2], what="change 2")
            os.kill(os.getpid(), SIG)
            write_state(self.state, 3, 2, "int4")
            os.kill(os.getpid(), SIG)
            wait_until(lambda: rec.seqs() == [2, 3], what="change 3")
            p = rec.profiles[0]
            self.assertEqual((p.name, p.level, p.levels, p.env), ("int8", 1, 3, {"MAX_BATCH": "16"}))

    def test_callback_errors_are_contained(self):
        srv = self.fake_server()
        rec = Recorder()

        def bad(p):
            rec(p)
            raise RuntimeError("callback bug")
        with self.env(srv.path):
            w = self.watch(bad)
            self.assertTrue(w.wait_subscribed(5))
            for seq, prof in [(2, "int8"), (3, "int4")]:
                with self.assertLogs("gpuguard", "ERROR") as logs:
                    srv.publish(seq, seq - 1, prof)
                    # The handler appends to records before output, from the
                    # watcher's thread: wait on the list that is read below.
                    wait_until(lambda: logs.output, what="the callback's error logged")
                self.assertIn("callback failed", logs.output[0])
            self.assertEqual(rec.seqs(), [2, 3])
            self.assertTrue(w.subscribed)

    def test_stop(self):
        srv = self.fake_server()
        rec = Recorder()
        with self.env(srv.path):
            w = gpuguard.on_change(rec)
            self.assertTrue(w.wait_subscribed(5))
            w.stop()
            self.assertFalse(w._thread.is_alive())
            write_state(self.state, 2, 1, "int8")
            os.kill(os.getpid(), SIG)  # the handler stays, and delivers nothing
            srv.publish(2, 1, "int8")
            # A second watcher sees the change: the first one did not.
            rec2 = Recorder()
            w2 = self.watch(rec2)
            self.assertTrue(w2.wait_subscribed(5))
            srv.publish(3, 2, "int4")
            wait_until(lambda: rec2.seqs() == [3])
            self.assertEqual(rec.seqs(), [])

    def test_chains_previous_handler(self):
        rec = Recorder()
        seen = []
        old = signal.getsignal(signal.SIGUSR2)
        self.addCleanup(signal.signal, signal.SIGUSR2, old)
        ggwatch._dispatch.pop(signal.SIGUSR2, None)
        signal.signal(signal.SIGUSR2, lambda s, f: seen.append(s))
        with self.env():
            self.watch(rec, signum=signal.SIGUSR2)
            write_state(self.state, 2, 1, "int8")
            os.kill(os.getpid(), signal.SIGUSR2)
            wait_until(lambda: rec.seqs() == [2] and seen == [signal.SIGUSR2])
        ggwatch._dispatch.pop(signal.SIGUSR2, None)

    def test_outside_main_thread(self):
        rec = Recorder()
        out = []
        ggwatch._dispatch.pop(signal.SIGUSR2, None)
        with self.env():
            with self.assertLogs("gpuguard", "WARNING") as logs:
                t = threading.Thread(target=lambda: out.append(gpuguard.on_change(rec, signum=signal.SIGUSR2)))
                t.start()
                t.join(60)  # returns when the thread ends; out[0] is read below
            self.assertFalse(out[0].signal_installed)
            self.assertIn("main thread", logs.output[0])
            out[0].stop()


if __name__ == "__main__":
    unittest.main()
