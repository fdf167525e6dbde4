# gearshift_target_defaults(TARGET): warnings (as errors unless GEARSHIFT_WERROR=OFF) and sanitizers.
function(gearshift_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                                           -Wnon-virtual-dtor -Wold-style-cast)
  if(GEARSHIFT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(GEARSHIFT_SANITIZE)
  add_compile_options(-fsanitize=${GEARSHIFT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${GEARSHIFT_SANITIZE})
endif()

# gearshift_add_test(NAME SOURCES... LIBS ...): one GoogleTest executable registered with CTest.
function(gearshift_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT GEARSHIFT_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  gearshift_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE GEARSHIFT_SHARED_DIR="${GEARSHIFT_SHARED_DIR}"
                                             GEARSHIFT_DATA_DIR="${GEARSHIFT_DATA_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
endfunction()
