// dev.omniedge: the API an app codes against. Plain Java 11, no Android imports, so that every
// part a unit test can reach runs on a desktop JVM (android_app/host-test.sh does, with the host
// build of libomniedge_jni and the default artifacts).
plugins {
    `java-library`
}

java {
    sourceCompatibility = JavaVersion.VERSION_11
    targetCompatibility = JavaVersion.VERSION_11
}

dependencies {
    testImplementation("junit:junit:4.13.2")
}

tasks.test {
    // OmniEdgeTest needs the host JNI library and artifacts: host-test.sh passes them. Here:
    // -Pomniedge.textPlan=... -Pomniedge.omniPlan=... -Pomniedge.cli=... -Pomniedge.libraryPath=...
    val props = listOf("textPlan", "omniPlan", "cli")
    if (props.all { project.hasProperty("omniedge.$it") }) {
        props.forEach { systemProperty("omniedge.$it", project.property("omniedge.$it")!!) }
        systemProperty("java.library.path", project.property("omniedge.libraryPath")!!)
        jvmArgs("-Xcheck:jni")
    } else {
        exclude("**/OmniEdgeTest.class")
    }
}
