"""The one place dtr's version number is written.

Everything else reads it: the generated header core/version_number.h (DTR_VERSION_* macros,
hence dtr_version() and `dtr --version`), the SONAME of libdtr.so (libdtr.so.MAJOR), and,
through that header, the pkg-config file, the CMake package and the Debian package that
tools/install.sh writes. While MAJOR is 0 the API may still change: see docs/integration.md
for the ABI policy.
"""

DTR_VERSION = "0.9.0"

DTR_VERSION_MAJOR, DTR_VERSION_MINOR, DTR_VERSION_PATCH = DTR_VERSION.split(".")
