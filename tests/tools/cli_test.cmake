# End-to-end: kbit quantize + inspect on the demo's synthetic checkpoint.
# Run by ctest as: cmake -DKBIT=<kbit> -DWORK=<dir> -P cli_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
get_filename_component(DEMO_DIR ${WORK}/../demo ABSOLUTE)
set(ORIG ${DEMO_DIR}/original.safetensors)
if(NOT EXISTS ${ORIG})
  message(FATAL_ERROR "demo checkpoint ${ORIG} is missing (cli.demo_cpu must run first)")
endif()

execute_process(COMMAND ${KBIT} quantize ${ORIG} ${WORK}/q.safetensors --bits 4 --bits-for "experts=2" --device cpu
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "k=2" OR NOT out MATCHES "k=4" OR NOT out MATCHES "copied")
  message(FATAL_ERROR "quantize failed (${rc}):\n${out}\n${err}")
endif()

execute_process(COMMAND ${KBIT} inspect ${WORK}/q.safetensors --against ${ORIG}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "kbit k=4" OR NOT out MATCHES "SQNR dB" OR NOT out MATCHES "format: kbit version 1")
  message(FATAL_ERROR "inspect failed (${rc}):\n${out}\n${err}")
endif()

# An existing output is refused, and a failed run leaves nothing behind.
execute_process(COMMAND ${KBIT} quantize ${ORIG} ${WORK}/q.safetensors --device cpu
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "already exists")
  message(FATAL_ERROR "overwrite was not refused (${rc}):\n${err}")
endif()
execute_process(COMMAND ${KBIT} quantize ${ORIG} ${WORK}/bad.safetensors --bits-for "experts=9" --device cpu
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "unsupported bit width" OR EXISTS ${WORK}/bad.safetensors)
  message(FATAL_ERROR "bad --bits-for accepted (${rc}):\n${err}")
endif()
message(STATUS "cli quantize/inspect: ok")
