// omni-edge demo app: :omniedge is the plain-Java API (dev.omniedge, no Android imports, unit-tested
// on the host by host-test.sh); :app is the Activity and the JNI library built from controller_cpp/.
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}
dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()  // onnxruntime-android-qnn, qnn-runtime
    }
}
rootProject.name = "omni-edge"
include(":app", ":omniedge")
