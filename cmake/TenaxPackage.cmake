# Installation and the Debian packages (CPack, DEB): `cmake --build build
# --target package` writes two packages into the build folder:
#
#   tenax_<version>_amd64.deb        the runtime: tenax, the Python package,
#                                    examples, docs and man pages
#   tenax-bench_<version>_amd64.deb  tenax-bench and the peers it measures
#                                    tenax against (gRPC, Gloo, Open MPI, a
#                                    plain-socket ring) and their scripts
#
# Two packages, not one, so that a machine (or the container image,
# deploy/Dockerfile) that runs jobs carries none of the benchmark peers' libraries.
#
# Layout: the programs live in /usr/lib/tenax and /usr/bin holds symbolic
# links to them. `tenax bench` execs the tenax-bench next to the resolved tenax
# binary, and tenax-bench finds its peer programs and bench-files/ beside
# itself (/proc/self/exe), so they stay together in one private folder.
#
# Depends: dpkg-shlibdeps computes the libraries' packages; what the
# programs run rather than link is listed by hand below.

include(GNUInstallDirs)

set(TENAX_LIBEXEC_DIR ${CMAKE_INSTALL_LIBDIR}/tenax)
if(CMAKE_INSTALL_LIBDIR MATCHES "^lib/")
  set(TENAX_LIBEXEC_DIR lib/tenax)  # Debian's multiarch libdir is for libraries, not programs
endif()

# A relative symbolic link PREFIX/bin/NAME -> ../lib/tenax/NAME, made at install time.
function(tenax_install_bin_link name component)
  install(CODE "
    set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    file(MAKE_DIRECTORY \"\${_dir}\")
    file(CREATE_LINK \"../${TENAX_LIBEXEC_DIR}/${name}\" \"\${_dir}/${name}\" SYMBOLIC)
    message(STATUS \"Installing: \${_dir}/${name} -> ../${TENAX_LIBEXEC_DIR}/${name}\")"
    COMPONENT ${component})
endfunction()

# --- tenax: the runtime -------------------------------------------------------
install(TARGETS tenax RUNTIME DESTINATION ${TENAX_LIBEXEC_DIR} COMPONENT tenax)
tenax_install_bin_link(tenax tenax)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tenax/examples COMPONENT tenax
        PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tenax)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT tenax
        FILES_MATCHING PATTERN "*.md")

# Man pages: `tenax --help` and each command's --help, rendered by help2man
# (Debian's help2man) when it is installed; without it the package has none
# and configure says so.
find_program(HELP2MAN_PROGRAM help2man)
# tenax_man_pages(TARGET NAME DESCRIPTION COMPONENT [COMMAND...]): NAME.1.gz
# and NAME-COMMAND.1.gz from TARGET's --help, installed with COMPONENT.
function(tenax_man_pages target name description component)
  set(dir ${PROJECT_BINARY_DIR}/man/${name})
  set(pages ${dir}/${name}.1.gz)
  foreach(c ${ARGN})
    list(APPEND pages ${dir}/${name}-${c}.1.gz)
  endforeach()
  add_custom_command(
    OUTPUT ${pages}
    COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}> -DNAME=${name} -DDESCRIPTION=${description}
            "-DCOMMANDS=${ARGN}" -DHELP2MAN=${HELP2MAN_PROGRAM} -DOUT=${dir} -DVERSION=${PROJECT_VERSION}
            -P ${PROJECT_SOURCE_DIR}/cmake/TenaxManPages.cmake
    DEPENDS ${target} ${PROJECT_SOURCE_DIR}/cmake/TenaxManPages.cmake
    COMMENT "Rendering ${name}'s man pages from its --help (help2man)"
    VERBATIM)
  add_custom_target(${name}_man ALL DEPENDS ${pages})
  install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${component})
endfunction()
if(HELP2MAN_PROGRAM)
  tenax_man_pages(tenax tenax "deep-learning training that keeps going on cheap, unreliable machines" tenax
                  run train eval coordinator worker server store storage probe sched k8s report)
  tenax_man_pages(tenax-bench tenax-bench "benchmarks of tenax against its peers" tenax-bench)
else()
  message(STATUS "help2man not found: the packages will have no man pages (apt-get install help2man)")
endif()

# --- tenax-bench: the benchmarks and their peers ------------------------------
install(TARGETS tenax-bench ${TENAX_BENCH_PEER_TARGETS} RUNTIME DESTINATION ${TENAX_LIBEXEC_DIR} COMPONENT tenax-bench)
tenax_install_bin_link(tenax-bench tenax-bench)
install(FILES ${TENAX_BENCH_FILES} DESTINATION ${TENAX_LIBEXEC_DIR}/bench-files COMPONENT tenax-bench)

# --- CPack: the two .deb files ------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tenax)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "the tenax developers")
set(CPACK_PACKAGE_CONTACT "the tenax developers <tenax@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the .deb carries no debug info (RelWithDebInfo's is ~10x the code)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tenax tenax-bench)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_TENAX_PACKAGE_NAME tenax)
set(CPACK_DEBIAN_TENAX-BENCH_PACKAGE_NAME tenax-bench)
# Read, not linked: the default dataset (data.dir).
set(CPACK_DEBIAN_TENAX_PACKAGE_DEPENDS "dataset-fashion-mnist")
# Recommended (apt installs them unless told not to; the image does not):
# python3-torch for the Python package's tenax.torch and for Python workers
# (it pulls 330 MiB more into the image: Debian's libtorch-test, sympy...); ip and tc,
# which make a job's emulated hosts network namespaces when run as root
# (without them `tenax run` keeps its hosts on loopback and says so).
set(CPACK_DEBIAN_TENAX_PACKAGE_RECOMMENDS "python3 (>= 3.11), python3-torch, iproute2")
# The peers' launchers and scripts: mpirun, iperf3 (bench allreduce --hosts),
# ip (namespaced hosts), PyTorch (DDP, torchrun).
set(CPACK_DEBIAN_TENAX-BENCH_PACKAGE_DEPENDS
    "tenax (= ${PROJECT_VERSION}), openmpi-bin, iperf3, iproute2, python3-torch, python3-numpy")
set(CPACK_COMPONENT_TENAX_DESCRIPTION
    "deep-learning training that keeps going on cheap, unreliable machines (CPU-only build)
 tenax trains PyTorch models (libtorch) on preemptible cloud machines: elastic
 sync training whose survivors keep going when workers vanish, async
 parameter servers, gradient coding against stragglers, an erasure-coded
 training-data store, and network-aware placement. This build is CPU-only:
 it links Debian's CPU libtorch and trains on no GPU.
 .
 This package holds the tenax program, the Python package (import tenax,
 the torch.distributed backend \"tenax\"), the examples under
 /usr/share/tenax/examples, the documentation and the man pages.")
set(CPACK_COMPONENT_TENAX-BENCH_DESCRIPTION
    "benchmarks of tenax against its peers (CPU-only build)
 tenax-bench (also `tenax bench`) measures tenax against the systems it
 replaces in the same run: gRPC, Gloo, Open MPI and plain sockets for the
 transport and the allreduce, PyTorch DDP and torchrun for training and
 elastic recovery. It pulls in those peers' libraries, which the tenax
 package itself does not need.")
include(CPack)
