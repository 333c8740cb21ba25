# SPDX-License-Identifier: MIT
#
# packaging/install.cmake — the part of `cmake --install` that depends on
# where the files go, run at install time (install(CODE) in CMakeLists.txt
# sets the SDP_* variables, CMake sets CMAKE_INSTALL_PREFIX, and file(INSTALL)
# puts $DESTDIR in front of every destination):
#   - sdp.pc, for the prefix installed to;
#   - the installed sdp_run: tools/sdp_run with the installed library's
#     absolute path written into it (build/bin/sdp_run finds the library as
#     ../lib/libsdp.so instead);
#   - libsdp.conf, where the library reads it (/etc, whatever the prefix);
#     never over an administrator's own file, and not at all without write
#     access there (an installation into one's own prefix);
#   - the manual pages docs/man/*.[1-8] present now.

function(sdp_full_dir var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    set(${var} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

sdp_full_dir(sdp_libdir "${SDP_LIBDIR}")
sdp_full_dir(sdp_bindir "${SDP_BINDIR}")
sdp_full_dir(sdp_mandir "${SDP_MANDIR}")
set(gen "${SDP_BINARY_DIR}/packaging")
file(MAKE_DIRECTORY "${gen}")

# ---- sdp.pc ---------------------------------------------------------------------
# ${prefix}-relative paths where they lie under the prefix, as usual.
set(prefix "${CMAKE_INSTALL_PREFIX}")
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${SDP_${d}}")
    set(pc_${d} "${SDP_${d}}")
  else()
    set(pc_${d} "\${prefix}/${SDP_${d}}")
  endif()
endforeach()
configure_file("${SDP_SOURCE_DIR}/packaging/sdp.pc.in" "${gen}/sdp.pc" @ONLY)
file(INSTALL DESTINATION "${sdp_libdir}/pkgconfig" TYPE FILE FILES "${gen}/sdp.pc")

# ---- sdp_run ------------------------------------------------------------------------
file(READ "${SDP_SOURCE_DIR}/tools/sdp_run" script)
set(lib "${sdp_libdir}/libsdp.so.${SDP_SOVERSION}")
string(REPLACE "\ninstalled_lib=\"\"\n" "\ninstalled_lib=\"${lib}\"\n" installed "${script}")
if(installed STREQUAL script)
  message(FATAL_ERROR "tools/sdp_run has no line installed_lib=\"\" to write the installed library into")
endif()
file(MAKE_DIRECTORY "${gen}/bin")
file(WRITE "${gen}/bin/sdp_run" "${installed}")
file(INSTALL DESTINATION "${sdp_bindir}" TYPE PROGRAM FILES "${gen}/bin/sdp_run")

# ---- libsdp.conf -------------------------------------------------------------------
if(SDP_INSTALL_CONF)
  set(sample "${SDP_SOURCE_DIR}/packaging/libsdp.conf")
  set(conf "$ENV{DESTDIR}${SDP_CONF_DIR}/libsdp.conf")
  set(name libsdp.conf)
  if("$ENV{DESTDIR}" STREQUAL "")
    # An installation into a prefix of one's own, without root.
    execute_process(COMMAND test -w "${SDP_CONF_DIR}" RESULT_VARIABLE not_writable)
    if(not_writable)
      message(STATUS "Not installing ${conf}: ${SDP_CONF_DIR} is not writable")
      set(name "")
    endif()
  endif()
  if(name AND EXISTS "${conf}")
    file(READ "${conf}" have)
    file(READ "${sample}" want)
    if(NOT have STREQUAL want)
      set(name libsdp.conf.sample)
      message(STATUS "Keeping ${conf} (not the shipped sample): the sample goes to ${conf}.sample")
    endif()
  endif()
  if(name)
    file(INSTALL DESTINATION "${SDP_CONF_DIR}" TYPE FILE FILES "${sample}" RENAME "${name}")
  endif()
endif()

# ---- manual pages ----------------------------------------------------------------------
file(GLOB pages "${SDP_SOURCE_DIR}/docs/man/*.[1-8]")
foreach(page IN LISTS pages)
  string(REGEX REPLACE "^.*\\.([1-8])$" "\\1" section "${page}")
  file(INSTALL DESTINATION "${sdp_mandir}/man${section}" TYPE FILE FILES "${page}")
endforeach()
