# Libraries without libtorch: shared by the main build and the fuzz build.

# core: Status/Result, config, files, metrics. No logging here so that the
# fuzz build (clang) does not need spdlog.
# ISA-L (libisal-dev): CRC-32C in core, Reed-Solomon in store.
find_package(PkgConfig REQUIRED)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
add_library(tenax_core_base STATIC
  src/core/checksum.cc
  src/core/status.cc
  src/core/config.cc
  src/core/files.cc
  src/core/metrics.cc)
target_include_directories(tenax_core_base PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(tenax_core_base
  PUBLIC tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json PkgConfig::ISAL
  PRIVATE tenax_warnings)

# net's parsing of addresses users write (host:port): needed by the train
# config decoder, so it stays out of tenax_net (UCX) and in the fuzz build.
add_library(tenax_net_address STATIC src/net/host_port.cc src/net/emulated_links.cc)
target_link_libraries(tenax_net_address PUBLIC tenax_core_base PRIVATE tenax_warnings)

# The decoders of outside input in train (idx and npy files, the train config
# and its fault plan), free of libtorch so they can be fuzzed.
add_library(tenax_train_input STATIC
  src/train/idx.cc
  src/train/npy.cc
  src/train/fashion_mnist.cc
  src/train/train_config.cc
  src/train/fault_plan.cc
  src/train/batch_shares.cc
  src/train/price_table.cc)
target_link_libraries(tenax_train_input
  PUBLIC tenax_core_base tenax_net_address tenax_coding_input tenax_sched_input ZLIB::ZLIB
  PRIVATE tenax_warnings)

# net's wire protocol and its decoder: protobuf only, no UCX, so the decoder
# can be fuzzed.
find_package(Protobuf REQUIRED)
protobuf_generate_cpp(TENAX_NET_PROTO_SRCS TENAX_NET_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/net_wire.proto)
add_library(tenax_net_wire STATIC ${TENAX_NET_PROTO_SRCS} src/net/control_codec.cc)
target_include_directories(tenax_net_wire PUBLIC ${CMAKE_CURRENT_BINARY_DIR} ${CMAKE_SOURCE_DIR}/include)
target_include_directories(tenax_net_wire SYSTEM PUBLIC ${Protobuf_INCLUDE_DIRS})
target_link_libraries(tenax_net_wire PUBLIC tenax_core_base tenax_net_address ${Protobuf_LIBRARIES})

# comm's channel messages and their decoders (fuzzed with net's).
protobuf_generate_cpp(TENAX_COMM_PROTO_SRCS TENAX_COMM_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/comm_wire.proto)
add_library(tenax_comm_wire STATIC ${TENAX_COMM_PROTO_SRCS} src/comm/channel_codec.cc src/comm/buffer_plan.cc)
target_link_libraries(tenax_comm_wire PUBLIC tenax_net_wire)

# coord's messages and their decoders (fuzzed).
protobuf_generate_cpp(TENAX_COORD_PROTO_SRCS TENAX_COORD_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/coord_wire.proto)
add_library(tenax_coord_wire STATIC ${TENAX_COORD_PROTO_SRCS} src/coord/coord_codec.cc)
target_link_libraries(tenax_coord_wire PUBLIC tenax_net_wire PRIVATE tenax_warnings)

# ps: the parameter server's messages, merge rules, validator and
# checkpoints. Free of UCX and libtorch, so the checkpoint and message
# decoders can be fuzzed.
protobuf_generate_cpp(TENAX_PS_PROTO_SRCS TENAX_PS_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/ps_wire.proto)
add_library(tenax_ps_input STATIC ${TENAX_PS_PROTO_SRCS}
  src/ps/ps_codec.cc
  src/ps/merge_rule.cc
  src/ps/result_validator.cc
  src/ps/shard_checkpoint.cc)
target_link_libraries(tenax_ps_input PUBLIC tenax_net_wire ZLIB::ZLIB PRIVATE tenax_warnings)

# coding: gradient codes, decoders, straggler models, the shuffle policy,
# straggler detection and the coded exchange's messages. Free of UCX and
# libtorch, so the trace and message decoders can be fuzzed.
protobuf_generate_cpp(TENAX_CODING_PROTO_SRCS TENAX_CODING_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/coding_wire.proto)
add_library(tenax_coding_input STATIC ${TENAX_CODING_PROTO_SRCS}
  src/coding/gradient_code.cc
  src/coding/straggler_model.cc
  src/coding/coded_plan.cc
  src/coding/coded_codec.cc)
target_link_libraries(tenax_coding_input PUBLIC tenax_net_wire PRIVATE tenax_warnings)
# store: chunk files (their decoder is fuzzed), Reed-Solomon coding, the
# stripe layout, placement and recovery plans.
# Free of UCX and libtorch.
protobuf_generate_cpp(TENAX_STORE_PROTO_SRCS TENAX_STORE_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/store_wire.proto)
add_library(tenax_store_input STATIC ${TENAX_STORE_PROTO_SRCS}
  src/store/chunk_file.cc
  src/store/reed_solomon.cc
  src/store/stripe_layout.cc
  src/store/placement.cc
  src/store/recovery_plan.cc
  src/store/dataset_store.cc
  src/store/recovery.cc
  src/store/storage_codec.cc)
target_link_libraries(tenax_store_input PUBLIC tenax_net_wire PkgConfig::ISAL PRIVATE tenax_warnings)

# sched: link metrics, the time-decayed link matrix, the scorer and the gang
# placer. Pure (no UCX, no libtorch), so the extender's JSON handling that
# uses them can be fuzzed.
protobuf_generate_cpp(TENAX_SCHED_PROTO_SRCS TENAX_SCHED_PROTO_HDRS ${CMAKE_SOURCE_DIR}/proto/sched_wire.proto)
add_library(tenax_sched_input STATIC ${TENAX_SCHED_PROTO_SRCS}
  src/sched/sched_codec.cc
  src/sched/link_metrics.cc
  src/sched/link_matrix.cc
  src/sched/scorer.cc
  src/sched/placer.cc
  src/sched/topology.cc)
target_link_libraries(tenax_sched_input PUBLIC tenax_core_base tenax_net_wire PRIVATE tenax_warnings)
# The Kubernetes extender's request handling (ExtenderArgs in, filter and
# prioritize answers out) and the cluster-state file format: pure, fuzzed.
target_sources(tenax_sched_input PRIVATE src/sched/cluster_state.cc src/sched/extender.cc)
# The Kubernetes manifests of a job (`tenax k8s manifests`): pure JSON.
target_sources(tenax_sched_input PRIVATE src/sched/k8s_manifests.cc)
# report: a run directory read into plain values and rendered as the
# self-contained HTML report (inline CSS and SVG). No spdlog, so the loader
# can be fuzzed.
add_library(tenax_report STATIC
  src/report/json_fields.cc
  src/report/run_record.cc
  src/report/format.cc
  src/report/svg_writer.cc
  src/report/svg_chart.cc
  src/report/svg_timeline.cc
  src/report/report_charts.cc
  src/report/page_assets.cc
  src/report/html_report.cc)
target_link_libraries(tenax_report PUBLIC tenax_core_base nlohmann_json::nlohmann_json PRIVATE tenax_warnings)
