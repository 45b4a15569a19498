"""PEP 517 build backend for the gpuguard client: setuptools, with a
stdlib fallback for building the wheel.

setuptools before 70.1 builds wheels (and even metadata) with the separate
`wheel` package. Where that is missing and there is no package index to get
it from, `pip install --no-build-isolation` would fail; this backend then
builds the pure-Python wheel itself from the metadata setuptools computes
from pyproject.toml. Everything else, and everything when `wheel` is
importable, is setuptools.build_meta unchanged.
"""

import base64
import hashlib
import io
import os
import zipfile

from setuptools import build_meta as _st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The sdist side never needs `wheel`.
build_sdist = _st.build_sdist
get_requires_for_build_sdist = _st.get_requires_for_build_sdist


def _setuptools_can_build_wheels():
    try:
        import wheel.bdist_wheel  # noqa: F401
        return True
    except ImportError:
        pass
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
        return True
    except ImportError:
        return False


def _dist():
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    dist = Distribution()
    apply_configuration(dist, os.path.join(ROOT, "pyproject.toml"))
    return dist


def _names(dist):
    name = dist.metadata.get_name().replace("-", "_")
    version = dist.metadata.get_version()
    return name, version, "%s-%s.dist-info" % (name, version)


def _metadata_files(dist):
    buf = io.StringIO()
    dist.metadata.write_pkg_file(buf)
    wheel_file = ("Wheel-Version: 1.0\nGenerator: gpuguard_build\n"
                  "Root-Is-Purelib: true\nTag: py3-none-any\n")
    top = "\n".join(sorted({p.split(".")[0] for p in dist.packages or []})) + "\n"
    return {"METADATA": buf.getvalue(), "WHEEL": wheel_file, "top_level.txt": top}


def _package_files(dist):
    """(path in the wheel, path on disk) for each module and package data file."""
    data = dist.package_data or {}
    out = []
    for pkg in dist.packages or []:
        pdir = os.path.join(ROOT, *pkg.split("."))
        extra = set(data.get(pkg, ())) | set(data.get("", ()))
        for fn in sorted(os.listdir(pdir)):
            full = os.path.join(pdir, fn)
            if os.path.isfile(full) and (fn.endswith(".py") or fn in extra):
                out.append(("/".join(pkg.split(".") + [fn]), full))
    return out


def _write_wheel(wheel_directory, files):
    """files: (archive name, bytes) without the RECORD, which is added."""
    dist = _dist()
    name, version, info = _names(dist)
    entries = list(files) + [
        ("%s/%s" % (info, k), v.encode("utf-8")) for k, v in _metadata_files(dist).items()]
    record = []
    for arc, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
    record.append("%s/RECORD,," % info)
    entries.append(("%s/RECORD" % info, ("\n".join(record) + "\n").encode("utf-8")))
    wheel_name = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    return wheel_name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    if _setuptools_can_build_wheels():
        return _st.get_requires_for_build_wheel(config_settings)
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if _setuptools_can_build_wheels():
        return _st.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    dist = _dist()
    _, _, info = _names(dist)
    d = os.path.join(metadata_directory, info)
    os.makedirs(d, exist_ok=True)
    for k, v in _metadata_files(dist).items():
        with open(os.path.join(d, k), "w", encoding="utf-8") as f:
            f.write(v)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if _setuptools_can_build_wheels():
        return _st.build_wheel(wheel_directory, config_settings, metadata_directory)
    return _write_wheel(wheel_directory, [(arc, _read(p)) for arc, p in _package_files(_dist())])


# Editable installs (pip install -e): a .pth file pointing at this tree.

def get_requires_for_build_editable(config_settings=None):
    if _setuptools_can_build_wheels():
        return _st.get_requires_for_build_editable(config_settings)
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    if _setuptools_can_build_wheels():
        return _st.prepare_metadata_for_build_editable(metadata_directory, config_settings)
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    if _setuptools_can_build_wheels():
        return _st.build_editable(wheel_directory, config_settings, metadata_directory)
    name, version, _ = _names(_dist())
    pth = ("__editable__.%s-%s.pth" % (name, version), (ROOT + "\n").encode("utf-8"))
    return _write_wheel(wheel_directory, [pth])
