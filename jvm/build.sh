#!/usr/bin/env bash
# Fetches Delta Lake's jars from Maven Central and builds lakelog's own
# classes (LogStore, UDF, the format("lakelog") provider and its resources,
# e.g. META-INF/services), all into .jars/ (git-ignored). Needs the venv's PySpark for
# the compile classpath. Usage: jvm/build.sh <project-root> <python>
set -euo pipefail
root=$1
python=$2
jars="$root/.jars"
rm -rf "$jars" "$root/jvm/classes"
mkdir -p "$jars" "$root/jvm/classes"
mvn -q -B -f "$root/jvm/pom.xml" dependency:copy-dependencies \
    -DincludeGroupIds=io.delta,io.unitycatalog -DoutputDirectory="$jars"
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
javac -nowarn -source 17 -target 17 -d "$root/jvm/classes" \
    -cp "$spark_jars/*:$jars/*" \
    $(find "$root/jvm/src/main/java" -name '*.java')
cp -R "$root/jvm/src/main/resources/." "$root/jvm/classes/"
jar cf "$jars/lakelog-jvm.jar" -C "$root/jvm/classes" .
rm -rf "$root/jvm/classes"
touch "$jars/.complete"
