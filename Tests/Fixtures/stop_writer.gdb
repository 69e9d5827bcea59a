# Holds a writer (dead_writer SEGMENT verbs N) stopped inside the functions
# that publish a verb, 1.5 s at each stop, at the entry and again a few
# instructions further in. Used by ConcurrencyTests and scripts/stress-segment.sh.
set pagination off
set confirm off
break publish
break publish_resolved
run
shell sleep 1.5
stepi 7
shell sleep 1.5
continue
shell sleep 1.5
stepi 7
shell sleep 1.5
continue
shell sleep 1.5
stepi 7
shell sleep 1.5
continue
