# Sourced by tests/check_examples.sh and tests/check_unseen.sh: the queued `fusc check` runs.
# run_queue: runs each line of the file $runs as `$FUSC check LINE`, $JOBS at a time, with
# the folder $res for their results; adds to $pass and $fail and prints each failure (its
# command and the first lines of its output) in list order.
run_queue() {
	export FUSC res
	# shellcheck disable=SC2016
	awk '{ print NR, $0 }' "$runs" | xargs -P "$JOBS" -L 1 sh -c '
		i=$1; shift
		if "$FUSC" check "$@" >"$res/$i.out" 2>&1; then
			touch "$res/$i.pass"
		else
			{ echo "FAIL: $FUSC check $*"; sed "s/^/  | /" "$res/$i.out" | head -40; } >"$res/$i.fail"
		fi
		rm -f "$res/$i.out"' _
	rq_n=$(wc -l <"$runs")
	rq_i=1
	while [ "$rq_i" -le "$rq_n" ]; do
		if [ -f "$res/$rq_i.pass" ]; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			if [ -f "$res/$rq_i.fail" ]; then
				cat "$res/$rq_i.fail"
			else
				echo "FAIL: run $rq_i did not finish: $(sed -n "${rq_i}p" "$runs")"
			fi
		fi
		rq_i=$((rq_i + 1))
	done
}
