# $KBIT_LINEAR_CONFIGS on a GPU: a user's tuned table (here one entry that sends a toy shape at
# M <= 4 to dequantize + cuBLAS, which the heuristic would not pick) decides kbit::linear's plan
# in `kbit bench --shapes`. Without a GPU it prints SKIPPED (the ctest test skips on that).
# Run by ctest as: cmake -DKBIT=<kbit> -DWORK=<dir> -P user_table_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/toy.json [[{"toy": {"projections": [{"name": "p", "K": 256, "N": 384}]}}]])

execute_process(COMMAND ${KBIT} bench --shapes ${WORK}/toy.json --m 4 --bits 4 --backend kbit_linear --repeats 3
                        --settle-ms 0 --no-routed-moe --json ${WORK}/plain.jsonl
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(err MATCHES "needs a CUDA GPU")
  message("SKIPPED: no GPU")
  return()
endif()
if(NOT rc EQUAL 0 OR NOT out MATCHES "device: ([^(]+) \\(sm_")
  message(FATAL_ERROR "bench failed (${rc}):\n${out}\n${err}")
endif()
string(STRIP "${CMAKE_MATCH_1}" device)
file(READ ${WORK}/plain.jsonl plain)
if(plain MATCHES "dequant_cublas")
  message(FATAL_ERROR "the heuristic already picks dequant_cublas; the test shape shows nothing:\n${plain}")
endif()

file(WRITE ${WORK}/table.json "{\"entries\": [{\"device\": \"${device}\", \"bits\": 4, \"n\": 384, \"k\": 256, \"m\": 4, \"path\": \"dequant_cublas\"}]}")
set(ENV{KBIT_LINEAR_CONFIGS} ${WORK}/table.json)
execute_process(COMMAND ${KBIT} bench --shapes ${WORK}/toy.json --m 4 --bits 4 --backend kbit_linear,kbit_linear_untuned
                        --repeats 3 --settle-ms 0 --no-routed-moe --json ${WORK}/tuned.jsonl
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${WORK}/tuned.jsonl tuned)
if(NOT rc EQUAL 0 OR NOT tuned MATCHES "\"backend\":\"kbit_linear\",\"config\":\"dequant_cublas \\(table\\)\""
   OR NOT out MATCHES "KBIT_LINEAR_CONFIGS=" OR NOT tuned MATCHES "\"valid\":true")
  message(FATAL_ERROR "the user's table was not used (${rc}):\n${out}\n${err}\n${tuned}")
endif()
# kbit_linear_untuned passes over every table.
if(NOT tuned MATCHES "\"backend\":\"kbit_linear_untuned\",\"config\":\"fused_mma [^\"]*\\(heuristic\\)\"")
  message(FATAL_ERROR "kbit_linear_untuned took a table's plan:\n${tuned}")
endif()

# A table that cannot be read fails the plan with an error naming it.
set(ENV{KBIT_LINEAR_CONFIGS} ${WORK}/missing.json)
execute_process(COMMAND ${KBIT} bench --shapes ${WORK}/toy.json --m 4 --bits 4 --backend kbit_linear --repeats 3
                        --settle-ms 0 --no-routed-moe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${out}${err}" MATCHES "KBIT_LINEAR_CONFIGS: [^\n]*missing.json: cannot open the tuned table")
  message(FATAL_ERROR "a missing table was not reported (${rc}):\n${out}\n${err}")
endif()
message(STATUS "user tuned table: ok")
