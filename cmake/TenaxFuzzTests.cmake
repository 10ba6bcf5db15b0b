# Short libFuzzer runs of every decoder of outside input. Each run starts from
# the seed corpus under fuzz/corpus/<target> and must finish without a crash,
# leak or sanitizer report.
set(TENAX_FUZZ_SECONDS 20 CACHE STRING "Seconds per fuzz target in ctest")
foreach(target idx_fuzz npy_fuzz config_fuzz net_wire_fuzz batch_shares_fuzz shard_checkpoint_fuzz price_table_fuzz ps_wire_fuzz straggler_trace_fuzz coding_wire_fuzz chunk_file_fuzz storage_wire_fuzz cross_memory_wire_fuzz extender_fuzz sched_wire_fuzz report_fuzz link_faults_fuzz)
  # New inputs go to the build tree; the seed corpus in the source stays read-only.
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz-corpus/${target})
  add_test(NAME fuzz.${target}
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
            ${TENAX_FUZZ_BIN}/${target}
            -max_total_time=${TENAX_FUZZ_SECONDS} -rss_limit_mb=2048
            -timeout=10 -print_final_stats=1
            ${CMAKE_BINARY_DIR}/fuzz-corpus/${target}
            ${CMAKE_SOURCE_DIR}/fuzz/corpus/${target})
  set_tests_properties(fuzz.${target} PROPERTIES LABELS fuzz TIMEOUT 300)
endforeach()
