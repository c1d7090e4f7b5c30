# Warning and sanitizer flags for every target of the project.
set(KHOST_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
    -Wundef -Wpointer-arith -Wvla -Wno-unused-parameter)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  list(APPEND KHOST_WARNINGS -Wno-format-truncation) # messages are truncated on purpose to fit their buffers
endif()
if(KHOST_WERROR)
  list(APPEND KHOST_WARNINGS -Werror)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C>:${KHOST_WARNINGS}>")

if(KHOST_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:C>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()
