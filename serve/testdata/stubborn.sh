#!/bin/sh
# A kit that will not stop: it ignores SIGINT and SIGTERM, and forks a
# child (which ignores them too: ignored signals stay ignored across exec)
# that holds its output. It writes the child's pid to the file $1 and then
# says "ready" on stdout.
trap '' INT TERM
sleep 1000 &
echo "$!" >"$1"
echo ready
wait
