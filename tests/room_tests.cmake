# The rooms' unit tests (no process, no preload): the rooms' own objects, the stand-in driver linked as libcuda.so.1
# (the driver room finds it loaded, as it finds a job's driver). Included by tests/CMakeLists.txt in every build,
# sanitizer builds too.
add_executable(room_tests rooms/room_setup.cpp rooms/stand_in_wrappers.cpp rooms/test_provenance.cpp
                          rooms/test_allocations.cpp rooms/test_kernel_table.cpp rooms/test_reentry.cpp
                          rooms/test_memo.cpp rooms/test_map_compare.cpp rooms/test_arena.cpp
                          rooms/test_python_frames.cpp rooms/test_declared.cpp rooms/test_full_check.cpp
                          rooms/test_device_audit.cpp rooms/test_reporter.cpp rooms/test_fleet.cpp
                          $<TARGET_OBJECTS:tmaguard_rooms>)
target_include_directories(room_tests PRIVATE ${PROJECT_SOURCE_DIR}/shim ${CUDA_DRIVER_INCLUDE} fake_cuda ${TG_GENERATED})
target_compile_definitions(room_tests PRIVATE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL SPDLOG_NO_TLS
                                              SPDLOG_DISABLE_DEFAULT_LOGGER)
target_link_libraries(room_tests PRIVATE tmaguard::core fake_cuda GTest::gtest_main dl pthread)
gtest_discover_tests(room_tests DISCOVERY_TIMEOUT 60 PROPERTIES ENVIRONMENT "TMAGUARD_MODE=log")
