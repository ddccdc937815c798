# cmake -DINPUT=file -DOUTPUT=file.cc -DSYMBOL=name -P embed_text.cmake: writes a C++ file defining
# `extern const char SYMBOL[]` with INPUT's text (the PTX gpupool embeds).
file(READ "${INPUT}" text)
set(delimiter "gpupool_embedded")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter")
endif()
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by tools/emu_bench/embed_text.cmake; do not edit.\n"
     "extern const char ${SYMBOL}[];\n"
     "const char ${SYMBOL}[] = R\"${delimiter}(${text})${delimiter}\";\n")
