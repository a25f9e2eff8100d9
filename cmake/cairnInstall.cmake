include(CMakePackageConfigHelpers)

set(CAIRN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cairn)

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(cairn_install_targets cairn_core cairn cairn_core_compiled)
if(TARGET cairn_compiled)
  list(APPEND cairn_install_targets cairn_compiled)
endif()
install(TARGETS ${cairn_install_targets} EXPORT cairnTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT cairnTargets NAMESPACE cairn:: DESTINATION ${CAIRN_CMAKE_DIR})
install(FILES cmake/cairnDependencies.cmake DESTINATION ${CAIRN_CMAKE_DIR})

configure_package_config_file(cmake/cairnConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/cairnConfig.cmake
                              INSTALL_DESTINATION ${CAIRN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cairnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cairnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cairnConfigVersion.cmake
        DESTINATION ${CAIRN_CMAKE_DIR})
