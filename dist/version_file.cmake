# cmake -DOUT=FILE -DVERSION=X.Y.Z -DCOMPAT=SameMinorVersion -P version_file.cmake
# dtrConfigVersion.cmake through CMake's own helper (tools/install.sh runs this).
include(CMakePackageConfigHelpers)
write_basic_package_version_file("${OUT}" VERSION "${VERSION}" COMPATIBILITY "${COMPAT}"
                                 ARCH_INDEPENDENT)
