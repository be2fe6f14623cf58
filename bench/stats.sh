#!/usr/bin/env bash
# Sourced by compare.sh and hey.sh: the ratio, median and confidence
# interval they report.

# ratio A B prints A / B to three decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# median prints the median of its arguments.
median() { printf "%s\n" "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# ci prints the 95 % confidence interval of the median of its arguments:
# [x(k), x(n+1-k)] of the sorted values, k the largest rank with
# P(Binomial(n, 1/2) <= k-1) <= 0.025; "n/a" below 6 values.
ci() {
	printf "%s\n" "$@" | sort -g | awk '
		{ a[NR] = $1 }
		END {
			n = NR; k = 0; p = 0.5 ^ n; cdf = p
			for (j = 1; j <= n && cdf <= 0.025; j++) { k = j; p = p * (n - j + 1) / j; cdf += p }
			if (k < 1) { print "n/a (fewer than 6 rounds)"; exit }
			printf "[%s, %s]\n", a[k], a[n + 1 - k]
		}'
}
