"""In-tree PEP 517 build backend for orchard-rl, standard library only.

``pip install --no-index ./python`` builds in an isolated environment that
holds only what ``[build-system] requires`` names, and offline it can
fetch nothing. setuptools cannot do that job in a fresh venv: Python 3.11's
venv has setuptools 65, which builds wheels only with the ``wheel``
package (not in a venv), and Python >= 3.12 venvs have no setuptools at
all. The package is pure Python with no dependencies, so this backend
writes the wheel itself: the files under ``src/orchard`` plus the
``.dist-info`` metadata (PEP 427, PEP 566). ``pip install --no-build-isolation``
and any other PEP 517 frontend work the same way.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tarfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _meta() -> dict[str, str]:
    with open(os.path.join(_ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    fields = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(rf'^{key}\s*=\s*"([^"]*)"', text, re.M)
        if not m:
            raise RuntimeError(f"pyproject.toml: [project] {key} is missing")
        fields[key] = m.group(1)
    return fields


def _metadata(meta: dict[str, str]) -> str:
    with open(os.path.join(_ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {meta['name']}\nVersion: {meta['version']}\n"
        f"Summary: {meta['description']}\nRequires-Python: {meta['requires-python']}\n"
        "License: Apache-2.0\nDescription-Content-Type: text/markdown\n\n" + readme
    )


def _dist_info(meta: dict[str, str]) -> str:
    return f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"


def _package_files() -> list[tuple[str, str]]:
    src = os.path.join(_ROOT, "src")
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, "orchard")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name == "py.typed":
                full = os.path.join(dirpath, name)
                out.append((full, os.path.relpath(full, src).replace(os.sep, "/")))
    return out


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}\n"


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None) -> str:
    meta = _meta()
    info = _dist_info(meta)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(meta))
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    meta = _meta()
    info = _dist_info(meta)
    name = f"{meta['name'].replace('-', '_')}-{meta['version']}-py3-none-any.whl"
    extra = {
        f"{info}/METADATA": _metadata(meta).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: orchard_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": b"orchard\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for full, arcname in _package_files():
            with open(full, "rb") as f:
                data = f.read()
            zf.writestr(arcname, data)
            record.append(_record_line(arcname, data))
        for arcname, data in extra.items():
            zf.writestr(arcname, data)
            record.append(_record_line(arcname, data))
        record.append(f"{info}/RECORD,,\n")
        zf.writestr(f"{info}/RECORD", "".join(record))
    return name


def build_sdist(sdist_directory, config_settings=None) -> str:
    meta = _meta()
    base = f"{meta['name'].replace('-', '_')}-{meta['version']}"
    with tarfile.open(os.path.join(sdist_directory, base + ".tar.gz"), "w:gz") as tf:
        for rel in ("pyproject.toml", "README.md", "build_backend/orchard_build.py"):
            tf.add(os.path.join(_ROOT, rel), f"{base}/{rel}")
        for full, arcname in _package_files():
            tf.add(full, f"{base}/src/{arcname}")
    return base + ".tar.gz"
