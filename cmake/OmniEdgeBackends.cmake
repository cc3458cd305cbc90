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
    if(ONNXRUNTIME_ROOT)
      file(GLOB _ort_libs "${ONNXRUNTIME_ROOT}/lib/libonnxruntime.so*")
      list(GET _ort_libs 0 OMNI_EDGE_ORT_LIBRARY)
    else()
      omni_edge_python_query(OMNI_EDGE_ORT_LIBRARY
        "import onnxruntime, pathlib; print(sorted(pathlib.Path(onnxruntime.__file__).parent.glob('capi/libonnxruntime.so*'))[0])")
    endif()
    omni_edge_python_query(_qnn_dir "import onnxruntime_qnn, pathlib; print(pathlib.Path(onnxruntime_qnn.__file__).parent)")
    if(_qnn_dir)
      set(OMNI_EDGE_QNN_EP_LIBRARY "${_qnn_dir}/libonnxruntime_providers_qnn.so")
      set(OMNI_EDGE_QNN_BACKEND "${_qnn_dir}/libQnnHtp.so")
    endif()
    if(NOT OMNI_EDGE_ORT_LIBRARY)
      message(WARNING "omni-edge: no onnxruntime wheel found for ${Python_EXECUTABLE}; the backend will load libonnxruntime.so.1 from the library path (or OMNI_EDGE_ONNXRUNTIME_LIB)")
    endif()
    message(STATUS "omni-edge: onnxruntime backend (headers ${OMNI_EDGE_ORT_INCLUDE_DIR}, default library '${OMNI_EDGE_ORT_LIBRARY}')")
  endif()
endif()

if(OMNI_EDGE_WITH_EXECUTORCH)
  omni_edge_python_query(_et_dir "import executorch; print(executorch.__path__[0])")
  omni_edge_python_query(OMNI_EDGE_EXECUTORCH_VERSION "import importlib.metadata as m; print(m.version('executorch'))")
  if(_et_dir)
    find_package(executorch CONFIG QUIET PATHS "${_et_dir}/share/cmake" NO_DEFAULT_PATH)
  endif()
  if(NOT TARGET executorch::runtime)
    message(WARNING "ExecuTorch runtime (pip wheel CMake package, CMake >= 3.28) not found: building without the executorch backend")
    set(OMNI_EDGE_WITH_EXECUTORCH OFF)
  else()
    message(STATUS "omni-edge: executorch backend (${OMNI_EDGE_EXECUTORCH_VERSION}, ${_et_dir})")
  endif()
endif()
