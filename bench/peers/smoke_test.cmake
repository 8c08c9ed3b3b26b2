# The smoke test of shoal-bench-peers (ctest bench_peers_smoke): `shoal-bench-peers --smoke`
# exits 0 and its table has a row for each of the three systems. Run with -DBENCH=<binary>.
execute_process(COMMAND ${BENCH} --smoke RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "shoal-bench-peers --smoke exited with ${rc}:\n${err}")
endif()
foreach(system shoal redis jetstream)
  if(NOT out MATCHES "\n${system} +[0-9]")
    message(FATAL_ERROR "shoal-bench-peers --smoke printed no result for ${system}:\n${err}")
  endif()
endforeach()
