# Renders man pages with help2man (cmake -P; TenaxPackage.cmake runs it):
# NAME.1 from `PROGRAM --help`, and NAME-CMD.1 from `PROGRAM CMD --help` for
# each of COMMANDS, then gzips them (-n: no time stamp, reproducible).
# Inputs: PROGRAM (the binary), NAME, DESCRIPTION, COMMANDS (may be empty),
# HELP2MAN, OUT (folder), VERSION. A --help that fails stops the build: a
# man page holding an error message is worse than none.
file(MAKE_DIRECTORY ${OUT})

function(render name program description)
  execute_process(COMMAND ${program} --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${program} --help failed (${rc}): ${err}")
  endif()
  execute_process(
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --version-string=${VERSION} --section=1
            --name=${description} --output=${OUT}/${name}.1 ${program}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "help2man ${name}: ${err}")
  endif()
  execute_process(COMMAND gzip -n -9 -f ${OUT}/${name}.1 RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${OUT}/${name}.1 failed")
  endif()
endfunction()

render(${NAME} ${PROGRAM} "${DESCRIPTION}")
foreach(c ${COMMANDS})
  # help2man runs one program: a two-line wrapper runs `PROGRAM CMD`.
  set(wrapper ${OUT}/${NAME}-${c})
  file(WRITE ${wrapper} "#!/bin/sh\nexec \"${PROGRAM}\" ${c} \"$@\"\n")
  file(CHMOD ${wrapper} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  render(${NAME}-${c} ${wrapper} "${NAME} ${c} (see ${NAME}(1))")
  file(REMOVE ${wrapper})
endforeach()
