# gearshift_target_defaults(TARGET): warnings (as errors unless GEARSHIFT_WERROR=OFF), unity build when
# GEARSHIFT_UNITY_BUILD (the Makefile's builds: each .cpp instantiated the same fmt/nlohmann-json templates at -O3
# again, and a newcomer's `make demo` spent 4.4 min compiling them; issue 48). Sanitizers: below.
function(gearshift_target_defaults target)
  if(GEARSHIFT_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
  endif()
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
  # Test files keep their own helpers in anonymous namespaces (temp_path, error_of, ...): one file, one unit.
  set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE GEARSHIFT_SHARED_DIR="${GEARSHIFT_SHARED_DIR}"
                                             GEARSHIFT_DATA_DIR="${GEARSHIFT_DATA_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
endfunction()
