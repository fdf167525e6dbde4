file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE "${OUT}" "// Generated from ${IN}; do not edit.\n#include <cstddef>\n"
  "namespace gearshift::embedded {\nextern const unsigned char ${SYMBOL}[] = {${body}};\n"
  "extern const std::size_t ${SYMBOL}_size = ${size};\n}\n")
