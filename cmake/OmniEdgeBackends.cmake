# Locates the runtimes the backends are built against:
#  - ONNX Runtime: C headers from ONNXRUNTIME_ROOT or third_party/onnxruntime (see
#    scripts/install_ort_headers.sh); the library is loaded at run time, by default the Python
#    wheel's (its path and the QNN plugin EP's are baked in as defaults, overridable by env).
#  - ExecuTorch: the pip wheel's CMake package (shared libraries with rpath).
# Each backend is optional; a backend that cannot be found is left out with a message.

find_package(Python 3.10 COMPONENTS Interpreter)

function(omni_edge_python_query out code)
  set(${out} "" PARENT_SCOPE)
  if(Python_Interpreter_FOUND)
    execute_process(COMMAND "${Python_EXECUTABLE}" -c "${code}" OUTPUT_VARIABLE value
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      set(${out} "${value}" PARENT_SCOPE)
    endif()
  endif()
endfunction()

set(OMNI_EDGE_RUNTIME_LIBDIR "" CACHE STRING "Bundles: load ONNX Runtime and the QNN libraries from here, relative to the binary ('$ORIGIN/../lib'); default: the Python wheels' paths")
set(ONNXRUNTIME_ROOT "" CACHE PATH "An ONNX Runtime installation (include/, lib/); default: third_party headers + the pip wheel's library")
if(OMNI_EDGE_WITH_ONNXRUNTIME)
  find_path(OMNI_EDGE_ORT_INCLUDE_DIR onnxruntime_c_api.h
            HINTS "${ONNXRUNTIME_ROOT}/include" "${ONNXRUNTIME_ROOT}/include/onnxruntime"
                  "${PROJECT_SOURCE_DIR}/third_party/onnxruntime/include" NO_DEFAULT_PATH)
  if(NOT OMNI_EDGE_ORT_INCLUDE_DIR)
    message(WARNING "ONNX Runtime C headers not found (run scripts/install_ort_headers.sh or set ONNXRUNTIME_ROOT): building without the onnxruntime backend")
    set(OMNI_EDGE_WITH_ONNXRUNTIME OFF PARENT_SCOPE)
    set(OMNI_EDGE_WITH_ONNXRUNTIME OFF)
  else()
    if(OMNI_EDGE_RUNTIME_LIBDIR)
      # A bundle (scripts/build_target.sh): the libraries travel with the binary, found
      # relative to it wherever the bundle is unpacked.
      if(WIN32)
        set(_names onnxruntime.dll onnxruntime_providers_qnn.dll QnnHtp.dll)
      elseif(ANDROID)  # the AAR's library has no versioned SONAME
        set(_names libonnxruntime.so libonnxruntime_providers_qnn.so libQnnHtp.so)
      else()
        set(_names libonnxruntime.so.1 libonnxruntime_providers_qnn.so libQnnHtp.so)
      endif()
      list(TRANSFORM _names PREPEND "${OMNI_EDGE_RUNTIME_LIBDIR}/")
      list(GET _names 0 OMNI_EDGE_ORT_LIBRARY)
      list(GET _names 1 OMNI_EDGE_QNN_EP_LIBRARY)
      list(GET _names 2 OMNI_EDGE_QNN_BACKEND)
      if(ANDROID)  # onnxruntime-android-qnn has the QNN EP inside libonnxruntime.so
        set(OMNI_EDGE_QNN_EP_LIBRARY builtin)
      endif()
    elseif(ONNXRUNTIME_ROOT)
      file(GLOB _ort_libs "${ONNXRUNTIME_ROOT}/lib/libonnxruntime.so*")
      list(GET _ort_libs 0 OMNI_EDGE_ORT_LIBRARY)
    elseif(NOT CMAKE_CROSSCOMPILING)  # the host's wheels are of no use to another target
      omni_edge_python_query(OMNI_EDGE_ORT_LIBRARY
        "import onnxruntime, pathlib; print(sorted(pathlib.Path(onnxruntime.__file__).parent.glob('capi/libonnxruntime.so*'))[0])")
      omni_edge_python_query(_qnn_dir "import onnxruntime_qnn, pathlib; print(pathlib.Path(onnxruntime_qnn.__file__).parent)")
      if(_qnn_dir)
        set(OMNI_EDGE_QNN_EP_LIBRARY "${_qnn_dir}/libonnxruntime_providers_qnn.so")
        set(OMNI_EDGE_QNN_BACKEND "${_qnn_dir}/libQnnHtp.so")
      endif()
    endif()
    if(NOT OMNI_EDGE_ORT_LIBRARY)
      message(WARNING "omni-edge: no ONNX Runtime library path known for ${Python_EXECUTABLE}; the backend will load libonnxruntime.so.1 from the library path (or OMNI_EDGE_ONNXRUNTIME_LIB)")
    endif()
    message(STATUS "omni-edge: onnxruntime backend (headers ${OMNI_EDGE_ORT_INCLUDE_DIR}, default library '${OMNI_EDGE_ORT_LIBRARY}')")
  endif()
endif()

set(EXECUTORCH_ROOT "" CACHE PATH "The executorch package directory of a wheel for the target (cross builds)")
set(OMNI_EDGE_EXECUTORCH_VERSION "" CACHE STRING "The executorch version at EXECUTORCH_ROOT")
if(OMNI_EDGE_WITH_EXECUTORCH AND CMAKE_CROSSCOMPILING AND NOT EXECUTORCH_ROOT)
  message(STATUS "omni-edge: cross build without EXECUTORCH_ROOT (the target's executorch wheel): no executorch backend")
  set(OMNI_EDGE_WITH_EXECUTORCH OFF)
endif()
if(OMNI_EDGE_WITH_EXECUTORCH)
  if(EXECUTORCH_ROOT)
    set(_et_dir "${EXECUTORCH_ROOT}")
  else()
    omni_edge_python_query(_et_dir "import executorch; print(executorch.__path__[0])")
    omni_edge_python_query(OMNI_EDGE_EXECUTORCH_VERSION "import importlib.metadata as m; print(m.version('executorch'))")
  endif()
  if(_et_dir)
    find_package(executorch CONFIG QUIET PATHS "${_et_dir}/share/cmake" NO_DEFAULT_PATH)
  endif()
  if(NOT TARGET executorch::runtime)
    message(WARNING "ExecuTorch runtime (pip wheel CMake package, CMake >= 3.28) not found: building without the executorch backend")
    set(OMNI_EDGE_WITH_EXECUTORCH OFF)
  else()
    message(STATUS "omni-edge: executorch backend (${OMNI_EDGE_EXECUTORCH_VERSION}, ${_et_dir})")
    if(OMNI_EDGE_RUNTIME_LIBDIR)
      # A bundle carries the libraries in lib/: keep the package's relative rpaths, drop the one
      # naming where the wheel was unpacked on the build machine.
      foreach(_target executorch::runtime executorch::kernels_optimized executorch::backend_xnnpack executorch::threadpool)
        get_target_property(_options ${_target} INTERFACE_LINK_OPTIONS)
        if(NOT _options)
          continue()
        endif()
        set(_kept "")
        foreach(_option IN LISTS _options)  # only the rpath: --no-as-needed options name the library too
          string(FIND "${_option}" "${_et_dir}" _at)
          if(_at EQUAL -1 OR NOT _option MATCHES "^LINKER:-rpath,")
            list(APPEND _kept "${_option}")
          endif()
        endforeach()
        set_target_properties(${_target} PROPERTIES INTERFACE_LINK_OPTIONS "${_kept}")
      endforeach()
    endif()
  endif()
endif()
