"""Build hook of the Python package (metadata: pyproject.toml). When built from an install tree
(<prefix>/lib/python, beside libckpt in <prefix>/lib), it records that libdir in ckpt/_install.py, so the
installed package finds libckpt without CKPT_LIBRARY or LD_LIBRARY_PATH wherever pip puts it.
Nothing is written beside this file (setuptools' build/ and *.egg-info go to a scratch directory), so an
install tree owned by root or on a read-only file system is a valid source."""
import atexit
import glob
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        libdir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        found = glob.glob(os.path.join(libdir, "libckpt.so*")) + glob.glob(os.path.join(libdir, "libckpt.dylib"))
        with open(os.path.join(self.build_lib, "ckpt", "_install.py"), "w") as f:
            f.write('"""Written by setup.py when the package was built: where libckpt was (None: not beside it)."""\n')
            f.write("LIBDIR = %r\n" % (libdir if found else None))


scratch = tempfile.mkdtemp(prefix="ckpt-python-build-")
atexit.register(shutil.rmtree, scratch, True)  # the wheel itself is written where pip asked
setup(cmdclass={"build_py": BuildPy},
      options={"build": {"build_base": os.path.join(scratch, "build")}, "egg_info": {"egg_base": scratch}})
