# gearshift_embed(OUT_CPP SYMBOL FILE): generate a .cpp holding FILE's bytes as
#   extern const unsigned char SYMBOL[]; extern const std::size_t SYMBOL_size;
# so that the binary carries its default inputs (GPU specs, the demo trace) and runs from anywhere.
function(gearshift_embed out_cpp symbol file)
  add_custom_command(
    OUTPUT ${out_cpp}
    COMMAND ${CMAKE_COMMAND} -DIN=${file} -DOUT=${out_cpp} -DSYMBOL=${symbol}
            -P ${CMAKE_SOURCE_DIR}/cmake/EmbedFile.cmake
    DEPENDS ${file} ${CMAKE_SOURCE_DIR}/cmake/EmbedFile.cmake
    COMMENT "Embedding ${file}")
endfunction()
