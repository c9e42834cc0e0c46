package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"tfd/daemon/service"
)

// countFlag is a flag.Value for a whole number of at least min. Its error says what the flag
// takes, so that a bad value is refused in one line that names the flag and what it accepts:
// `tfd bench: invalid value "-1" for flag -tokens: want a whole number of tokens, 1 or more`.
type countFlag struct {
	n    *int
	min  int
	unit string
}

func (f countFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.Itoa(*f.n)
}

func (f countFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < f.min {
		return fmt.Errorf("want a whole number of %s, %d or more", f.unit, f.min)
	}
	*f.n = n
	return nil
}

// listFlag is a flag.Value for a comma-separated list of whole numbers of at least 1.
type listFlag struct{ list *[]int }

func (f listFlag) String() string {
	if f.list == nil {
		return ""
	}
	s := make([]string, len(*f.list))
	for i, n := range *f.list {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (f listFlag) Set(s string) error {
	var list []int
	for field := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			return errors.New("want whole numbers of 1 or more separated by commas, e.g. 1,4,16")
		}
		list = append(list, n)
	}
	*f.list = list
	return nil
}

// rangeFlag is a flag.Value for a number from lo to hi, inclusive; like countFlag's, its error says
// what the flag takes.
type rangeFlag struct {
	v      *float32
	lo, hi float64
}

func (f rangeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*f.v), 'g', -1, 32)
}

func (f rangeFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 32)
	if err != nil || v < f.lo || v > f.hi {
		return fmt.Errorf("want a number from %g to %g", f.lo, f.hi)
	}
	*f.v = float32(v)
	return nil
}

// parseFlags parses args into fs for the command cmd. A bad flag is reported in one line,
// "tfd CMD: " and the flag package's own words (an unknown flag, or a value and what the flag
// takes), and gives exitUsage; -h prints the usage and gives 0. done is false when the command
// should go on.
func parseFlags(cmd string, fs *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	return parseFlagsArgs(cmd, fs, args, stderr, nil)
}

// parseFlagsArgs is parseFlags for a command that takes arguments: with operands non-nil, the
// arguments that are not flags are appended to it, and flags may come after them too
// (tfd pull REPO --revision v2).
func parseFlagsArgs(cmd string, fs *flag.FlagSet, args []string, stderr io.Writer, operands *[]string) (code int, done bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	for err == nil && operands != nil && fs.NArg() > 0 {
		*operands = append(*operands, fs.Arg(0))
		err = fs.Parse(fs.Args()[1:])
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, usage, service.DefaultConfigPath())
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "tfd %s: %v (tfd help lists the flags)\n", cmd, err)
		return exitUsage, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "tfd %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}
