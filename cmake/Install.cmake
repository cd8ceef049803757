# `cmake --install` and the Debian package (CPack, scripts/package.sh): the binary in bin/, the
# CUDA plugin in lib/turbospark/ and the bundled model in share/turbospark/models/, which is
# where the binary looks for them (relative to its own directory, so any prefix works).
# Installing (and packaging) takes what is built: it does not first build every target (the tests
# and benchmarks are no part of the install). Build `turbospark` first, as scripts/package.sh does.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
install(TARGETS turbospark RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TS_HAVE_CUDA)
  install(TARGETS turbospark_cuda LIBRARY DESTINATION ${TS_PLUGIN_INSTALL_DIR})
endif()
if(TS_HAVE_NCCL)
  install(TARGETS turbospark_nccl LIBRARY DESTINATION ${TS_PLUGIN_INSTALL_DIR})
endif()
install(FILES ${PROJECT_SOURCE_DIR}/models/tiny-moe-q8_0.gguf DESTINATION ${TS_MODEL_INSTALL_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/SERVER.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME turbospark)
set(CPACK_PACKAGE_VENDOR turbospark)
set(CPACK_PACKAGE_CONTACT "turbospark maintainers <turbospark@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "LLM inference runtime (CPU + CUDA) with an OpenAI- and Ollama-compatible server")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # turbospark_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# The shared libraries the binary links (httplib, libedit, pcre2, ...) become the package's
# dependencies, read by dpkg-shlibdeps. The CUDA plugin's libraries (cuBLAS, the CUDA runtime)
# come from NVIDIA's own packages, which Debian does not name: they are left out, and the plugin
# says what is missing when a run asks for CUDA without them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
if(TS_HAVE_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
include(CPack)
