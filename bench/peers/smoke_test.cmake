# The smoke test of shoal-bench-peers (ctest bench_peers_smoke): `shoal-bench-peers --smoke`
# exits 0 and its table has a row for each of the three systems. Run with -DBENCH=<binary>;
# -DSYSTEMS=a,b runs only those systems (without the flash sale) and checks their rows.
set(args --smoke)
set(systems shoal redis jetstream)
if(DEFINED SYSTEMS)
  list(APPEND args --systems ${SYSTEMS} --no-flash-sale)
  string(REPLACE "," ";" systems "${SYSTEMS}")
endif()
execute_process(COMMAND ${BENCH} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "shoal-bench-peers ${args} exited with ${rc}:\n${err}")
endif()
foreach(system ${systems})
  if(NOT out MATCHES "\n${system} +[0-9]")
    message(FATAL_ERROR "shoal-bench-peers ${args} printed no result for ${system}:\n${err}")
  endif()
endforeach()
