# Packaging of the tmaguard wheel (scripts/package.sh runs it on a copy of this folder with the installed tree of a
# release build in tmaguard/_install): the binaries are data files of the package, the `tmaguard` command a console
# script. The platform tag is set afterwards from the binaries' highest GLIBC symbol version (scripts/build-wheel).
import os

from setuptools import setup
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel


class BinaryDistribution(Distribution):
    """The package carries ELF binaries: never a pure-Python wheel."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: no Python ABI is involved (nothing is imported from the binaries), only libc's; the
    platform tag comes from scripts/build-wheel (manylinux_X_Y from the highest GLIBC_X.Y the binaries need)."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return ("py3", "none", os.environ["TMAGUARD_WHEEL_PLATFORM"])


def installed_files():
    out = []
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tmaguard")
    for dirpath, _, files in os.walk(os.path.join(base, "_install")):
        out += [os.path.relpath(os.path.join(dirpath, f), base) for f in files]
    return out


setup(
    name="tmaguard",
    version=os.environ.get("TMAGUARD_VERSION", "0.0.0"),
    description="runtime guard for CUDA TMA tensor-map layouts (LD_PRELOAD)",
    long_description="tmaguard is preloaded into CUDA jobs. It decodes the tensor maps every kernel launch receives "
                     "and stops, rejects or logs a launch whose layouts are wrong before the GPU writes garbage.",
    packages=["tmaguard"],
    package_data={"tmaguard": installed_files()},
    entry_points={"console_scripts": ["tmaguard = tmaguard:main"]},
    python_requires=">=3.8",
    distclass=BinaryDistribution,
    cmdclass={"bdist_wheel": PlatformWheel},
    zip_safe=False,
)
