#!/usr/bin/env bash
# Kept for old habits: lakelog's JVM library is built by jvm/build_jar.py. Usage: jvm/build.sh <project-root> <python>
exec "$2" "$1/jvm/build_jar.py"
