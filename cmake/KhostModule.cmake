# khost_add_module(<name> BACKEND|TASK SOURCES ... [LIBS ...])
# Builds <name>.so into plugins/ or tasks/ with one exported symbol (the entry point): hidden visibility,
# and -Wl,--no-undefined so the linker proves the module needs nothing from the khost binary.
function(khost_add_module name kind)
  cmake_parse_arguments(M "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} MODULE ${M_SOURCES})
  set_target_properties(${name} PROPERTIES PREFIX "" OUTPUT_NAME ${name}
                        C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden)
  if(kind STREQUAL "BACKEND")
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${KHOST_PLUGIN_OUTPUT_DIR})
    set(dest ${KHOST_INSTALL_MODDIR}/plugins)
  elseif(kind STREQUAL "TASK")
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${KHOST_TASK_OUTPUT_DIR})
    set(dest ${KHOST_INSTALL_MODDIR}/tasks)
  else()
    message(FATAL_ERROR "khost_add_module(${name}): kind must be BACKEND or TASK, not '${kind}'")
  endif()
  target_link_libraries(${name} PRIVATE khost_kit ${M_LIBS})
  if(NOT KHOST_SANITIZE)
    # ASan's runtime lives in the executable, so sanitized modules legitimately have undefined symbols.
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
  install(TARGETS ${name} LIBRARY DESTINATION ${dest})
endfunction()
