"""The one place dtr's version number is written.

Everything else reads it: the generated header core/version_number.h (DTR_VERSION_* macros,
hence dtr_version() and `dtr --version`), the SONAME of libdtr.so (libdtr.so.MAJOR), and,
through that header, the pkg-config file, the CMake package and the Debian package that
tools/install.sh writes. While MAJOR is 0 the API may still change: see docs/integration.md
for the ABI policy.
"""

DTR_VERSION = "0.9.1"

# "dev" while CHANGELOG.md has an "Unreleased" section (the tree is past the last release,
# on its way to DTR_VERSION); "" in the commit that releases it. The full version string is
# then "0.9.1-dev": `dtr --version`, dtr.pc, dtr.__version__ ("0.9.1.dev0" to pip). File
# names and the CMake package take the numbers alone.
DTR_VERSION_PRE = "dev"

DTR_VERSION_MAJOR, DTR_VERSION_MINOR, DTR_VERSION_PATCH = DTR_VERSION.split(".")
DTR_VERSION_STRING = DTR_VERSION + ("-" + DTR_VERSION_PRE if DTR_VERSION_PRE else "")
