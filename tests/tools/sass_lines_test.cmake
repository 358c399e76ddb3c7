# scripts/sass_lines.py on a cubin built here: it finds a loop's source lines in the SASS (with the
# PTX behind them) and the local-memory stores of a kernel that spills, and none in one that does not.
# Run by ctest as: cmake -DNVCC=<nvcc> -DPYTHON=<python3> -DSRC=<repo> -DWORK=<dir> -P sass_lines_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(CUBIN ${WORK}/sample.cubin)
execute_process(COMMAND ${NVCC} -gencode=arch=compute_90a,code=sm_90a -lineinfo -cubin -o ${CUBIN}
                        ${SRC}/tests/tools/sass_lines_sample.cu
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed (${rc}):\n${out}\n${err}")
endif()
set(SCRIPT ${SRC}/scripts/sass_lines.py)

execute_process(COMMAND ${PYTHON} ${SCRIPT} ${CUBIN} --kernel axpy --lines 7-9 --ptx-mix --local
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "_Z11axpy_kernelPfPKffi: [0-9]+ bytes"
   OR NOT out MATCHES "lines 7-9: [1-9][0-9]* slots in [1-9][0-9]* runs"
   OR NOT out MATCHES "ld.global.f32" OR NOT out MATCHES "fma.rn.f32"
   OR out MATCHES "STL at line" OR out MATCHES "_Z12spill_kernel")
  message(FATAL_ERROR "sass_lines.py on the loop (${rc}):\n${out}\n${err}")
endif()

execute_process(COMMAND ${PYTHON} ${SCRIPT} ${CUBIN} --kernel spill --lines 13-20 --local
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "_Z12spill_kernelPf" OR NOT out MATCHES "STL at line (1[3-9]|20)"
   OR NOT out MATCHES "LDL at line")
  message(FATAL_ERROR "sass_lines.py did not report the spills (${rc}):\n${out}\n${err}")
endif()
message(STATUS "sass_lines.py: ok")
