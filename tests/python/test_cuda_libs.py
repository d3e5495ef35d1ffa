"""singa/_cuda_libs.py: a CUDA wheel loads the nvidia-* wheels' libraries it lists, by path,
before the extension; anywhere else (no listing) it does nothing."""
import os
import shutil

import pytest

from singa import _cuda_libs

ZLIB = "/usr/lib/x86_64-linux-gnu/libz.so.1"  # any small loadable library stands in for cuBLAS


def _mapped():
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


def test_without_a_listing_nothing_is_loaded(monkeypatch, tmp_path):
    monkeypatch.setattr(_cuda_libs, "_LISTING", str(tmp_path / "_cuda_libs.txt"))
    monkeypatch.setattr(_cuda_libs, "_library_dirs", lambda: pytest.fail("looked for nvidia"))
    _cuda_libs.preload()


@pytest.mark.skipif(not os.path.exists(ZLIB), reason="needs %s" % ZLIB)
def test_listed_libraries_are_loaded_from_the_nvidia_folders(monkeypatch, tmp_path):
    lib_dir = tmp_path / "nvidia" / "cu13" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(ZLIB, lib_dir / "libfake_cublas.so.13")
    listing = tmp_path / "_cuda_libs.txt"
    listing.write_text("libfake_cublas.so.13\n")
    monkeypatch.setattr(_cuda_libs, "_LISTING", str(listing))
    monkeypatch.setattr(_cuda_libs, "_library_dirs", lambda: [str(tmp_path / "elsewhere"),
                                                              str(lib_dir)])
    _cuda_libs.preload()
    assert str(lib_dir / "libfake_cublas.so.13") in _mapped()


def test_a_missing_library_names_itself_and_the_wheels(monkeypatch, tmp_path):
    listing = tmp_path / "_cuda_libs.txt"
    listing.write_text("libcudnn.so.9\n")
    monkeypatch.setattr(_cuda_libs, "_LISTING", str(listing))
    monkeypatch.setattr(_cuda_libs, "_library_dirs", lambda: [])
    with pytest.raises(ImportError, match=r"libcudnn\.so\.9.*nvidia-cudnn-cu13"):
        _cuda_libs.preload()
