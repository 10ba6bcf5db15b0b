# Libraries without libtorch: shared by the main build and the fuzz build.

# core: Status/Result, config, files, metrics. No logging here so that the
# fuzz build (clang) does not need spdlog.
add_library(tenax_core_base STATIC
  src/core/status.cc
  src/core/config.cc
  src/core/files.cc
  src/core/metrics.cc)
target_include_directories(tenax_core_base PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(tenax_core_base
  PUBLIC tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json
  PRIVATE tenax_warnings)

# The decoders of outside input in train (idx files, train config), free of
# libtorch so they can be fuzzed.
add_library(tenax_train_input STATIC
  src/train/idx.cc
  src/train/fashion_mnist.cc
  src/train/train_config.cc)
target_link_libraries(tenax_train_input
  PUBLIC tenax_core_base ZLIB::ZLIB
  PRIVATE tenax_warnings)
