#!/usr/bin/env bash
# Fetches Delta Lake's jars and Hadoop's S3A connector from Maven Central and
# builds lakelog's own classes (LogStores, UDF, the format("lakelog") provider
# and its resources, e.g. META-INF/services), all into .jars/ (git-ignored).
# Needs the venv's PySpark for the compile classpath. Usage: jvm/build.sh <project-root> <python>
#
# .jars/*.jar      Delta's jars and lakelog-jvm.jar (spark.jars of lakelog's sessions)
# .jars/s3/*.jar   hadoop-aws and the AWS SDK v2 bundle (the JVM class path; see jvm/pom.xml)
set -euo pipefail
root=$1
python=$2
jars="$root/.jars"
rm -rf "$jars" "$root/jvm/classes"
mkdir -p "$jars/s3" "$root/jvm/classes"
mvn -q -B -f "$root/jvm/pom.xml" dependency:copy-dependencies \
    -DincludeGroupIds=io.delta,io.unitycatalog -DoutputDirectory="$jars"
# hadoop-aws's own dependencies minus what PySpark already ships (Hadoop
# itself is "provided" there). wildfly-openssl is optional (fs.s3a.ssl.channel.mode).
mvn -q -B -f "$root/jvm/pom.xml" dependency:copy-dependencies \
    -DincludeArtifactIds=hadoop-aws,bundle,analyticsaccelerator-s3 -DoutputDirectory="$jars/s3"
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
javac -nowarn -source 17 -target 17 -d "$root/jvm/classes" \
    -cp "$spark_jars/*:$jars/*:$jars/s3/*" \
    $(find "$root/jvm/src/main/java" -name '*.java')
cp -R "$root/jvm/src/main/resources/." "$root/jvm/classes/"
jar cf "$jars/lakelog-jvm.jar" -C "$root/jvm/classes" .
rm -rf "$root/jvm/classes"
touch "$jars/.complete"
