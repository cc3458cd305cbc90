// The demo app: one Activity over dev.omniedge, and libomniedge_jni built from this repository's
// controller_cpp/ by the NDK (src/main/cpp/CMakeLists.txt). ONNX Runtime and the QNN HTP
// libraries come from their official Maven packages and are packaged beside it.
plugins {
    id("com.android.application")
}

val ortVersion: String = providers.gradleProperty("omniedge.ortVersion").get()
val qnnVersion: String = providers.gradleProperty("omniedge.qnnVersion").get()
val ortHeaders = layout.buildDirectory.dir("onnxruntime-headers")

android {
    namespace = "dev.omniedge.app"
    compileSdk = 36
    // scripts/build_apk.sh passes the NDK it was given; Android Studio installs this version.
    val ndk = providers.gradleProperty("omniedge.ndkPath").orNull
    if (ndk != null) ndkPath = ndk else ndkVersion = "28.2.13676358"

    defaultConfig {
        applicationId = "dev.omniedge.app"
        minSdk = 29
        targetSdk = 36
        versionCode = 1
        versionName = "0.3.0"
        ndk {
            abiFilters += "arm64-v8a"  // Snapdragon phones; the HTP libraries exist for arm64 only
        }
        externalNativeBuild {
            cmake {
                arguments += listOf(
                    "-DANDROID_STL=c++_static",
                    "-DOMNI_EDGE_ORT_INCLUDE_DIR=${ortHeaders.get().asFile.absolutePath}",
                )
                targets += "omniedge_jni"
            }
        }
    }

    externalNativeBuild {
        cmake {
            path = file("src/main/cpp/CMakeLists.txt")
            version = "3.22.1"
        }
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_11
        targetCompatibility = JavaVersion.VERSION_11
    }

    packaging {
        jniLibs {
            // Extracted to nativeLibraryDir: the HTP's DSP side loads its skel libraries from a file path.
            useLegacyPackaging = true
        }
    }

    buildTypes {
        getByName("release") {
            isMinifyEnabled = false
            signingConfig = signingConfigs.getByName("debug")  // a demo: the debug key, as build_apk.sh says
        }
    }
}

// The C headers of the ONNX Runtime AAR, for the native build (the library itself is packaged
// from the dependency below and loaded at run time).
val onnxruntimeAar: Configuration by configurations.creating

dependencies {
    implementation(project(":omniedge"))
    implementation("com.microsoft.onnxruntime:onnxruntime-android-qnn:$ortVersion")  // libonnxruntime.so, QNN EP inside
    implementation("com.qualcomm.qti:qnn-runtime:$qnnVersion")  // libQnnHtp.so, libQnnHtpV*Skel.so, libQnnSystem.so
    onnxruntimeAar("com.microsoft.onnxruntime:onnxruntime-android-qnn:$ortVersion@aar")
}

val extractOnnxruntimeHeaders by tasks.registering(Copy::class) {
    from({ zipTree(onnxruntimeAar.singleFile) }) {
        include("headers/**")
        eachFile { path = path.removePrefix("headers/") }
        includeEmptyDirs = false
    }
    into(ortHeaders)
}

tasks.named("preBuild") {
    dependsOn(extractOnnxruntimeHeaders)
}
