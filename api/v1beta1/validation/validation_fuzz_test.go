package validation

import (
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The fuzz targets here check what the rules promise, against oracles that
// do not share their code: a hand-written RFC 1123 subdomain check and exact
// integer arithmetic for --max-unavailable. Seeds live in
// testdata/fuzz/<target>/ and in f.Add.

// isRFC1123Subdomain is the Kubernetes DNS-1123 subdomain, written out by hand:
// at most 253 characters, dot-separated non-empty labels of [a-z0-9-] that
// start and end with [a-z0-9] (Kubernetes does not cap a label at 63 here).
func isRFC1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
			if !alnum && (c != '-' || i == 0 || i == len(label)-1) {
				return false
			}
		}
	}
	return true
}

// assertRefusalNamesFieldAndValue is the contract of every ValidateNodeName
// refusal: it starts with the field, quotes the value (so a user can see a
// stray space or an invisible character), says the limit when the name is too
// long, and is valid UTF-8 whatever the input, so it survives the JSON of the
// AdmissionReview.
func assertRefusalNamesFieldAndValue(t *testing.T, name string, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, "spec.nodeName ") {
		t.Fatalf("refusal of %q does not start with the field spec.nodeName: %q", name, msg)
	}
	if !utf8.ValidString(msg) {
		t.Fatalf("refusal of %q is not valid UTF-8: %q", name, msg)
	}
	if name == "" {
		if !strings.Contains(msg, "is required") {
			t.Fatalf("refusal of the empty name does not say it is required: %q", msg)
		}
		return
	}
	if !strings.Contains(msg, strconv.Quote(name)) {
		t.Fatalf("refusal of %q does not quote the value: %q", name, msg)
	}
	if len(name) > validation.DNS1123SubdomainMaxLength && !strings.Contains(msg, "must be no more than 253 characters") {
		t.Fatalf("refusal of a %d-byte name does not state the 253 limit: %q", len(name), msg)
	}
}

func FuzzValidateNodeName(f *testing.F) {
	for _, s := range []string{
		"node02", "", "Node02", "node_02", "-node", "node-", "a..b", ".a", "a.", "a.b.c",
		"ip-10-0-0-1.ec2.internal", "0", "a-b", "硬體", "node\x00", "node\n", "\xff",
		strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("A", 254),
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63), strings.Repeat("a", 64),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateNodeName(name)
		want := isRFC1123Subdomain(name)
		k8sOK := len(validation.IsDNS1123Subdomain(name)) == 0
		if want != k8sOK {
			t.Fatalf("oracle disagrees with k8s.io/apimachinery on %q: hand-written %v, IsDNS1123Subdomain %v", name, want, k8sOK)
		}
		if (err == nil) != want {
			t.Fatalf("ValidateNodeName(%q) = %v, want valid=%v", name, err, want)
		}
		if err == nil {
			if len(name) > 253 || strings.ToLower(name) != name {
				t.Fatalf("accepted %q (%d bytes), not a lower-case name of at most 253", name, len(name))
			}
			return
		}
		assertRefusalNamesFieldAndValue(t, name, err)
		if again := ValidateNodeName(name); again == nil || again.Error() != err.Error() {
			t.Fatalf("ValidateNodeName(%q) is not deterministic: %v then %v", name, err, again)
		}
	})
}

// intOrStringForFuzz builds a --max-unavailable value without intstr.Parse,
// which truncates integers beyond int32 (and logs a stack trace doing so).
func intOrStringForFuzz(isInt bool, i int32, s string) intstr.IntOrString {
	if isInt {
		return intstr.FromInt32(i)
	}
	return intstr.FromString(s)
}

// floorPercent is floor(percent*total/100) in exact arithmetic.
func floorPercent(percent, total int) *big.Int {
	p := new(big.Int).Mul(big.NewInt(int64(percent)), big.NewInt(int64(total)))
	q, m := new(big.Int).QuoRem(p, big.NewInt(100), new(big.Int))
	if m.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

func FuzzMaxUnavailableNodes(f *testing.F) {
	f.Add(true, int32(2), "", 10)
	f.Add(true, int32(0), "", 10)
	f.Add(true, int32(-1), "", 10)
	f.Add(false, int32(0), "20%", 10)
	f.Add(false, int32(0), "25%", 10)
	f.Add(false, int32(0), "10%", 3)
	f.Add(false, int32(0), "0%", 3)
	f.Add(false, int32(0), "100%", 1000)
	f.Add(false, int32(0), "101%", 1000)
	f.Add(false, int32(0), "-5%", 10)
	f.Add(false, int32(0), "-0%", 10)
	f.Add(false, int32(0), "+5%", 10)
	f.Add(false, int32(0), "abc", 10)
	f.Add(false, int32(0), "2", 10)
	f.Add(false, int32(0), "%", 10)
	f.Add(false, int32(0), "9000000000000000000%", 1000)
	f.Add(false, int32(0), "99999999999999999999%", 10)
	f.Fuzz(func(t *testing.T, isInt bool, i int32, s string, total int) {
		// total is a node count: non-negative and far below 2^53, where the
		// float arithmetic of intstr is exact enough to compare with integers.
		if total < 0 {
			total = -(total + 1)
		}
		total %= 1 << 40
		v := intOrStringForFuzz(isInt, i, s)
		n, err := MaxUnavailableNodes(&v, total)
		if err != nil {
			if n != 0 {
				t.Fatalf("MaxUnavailableNodes(%s, %d) = %d with error %v", v.String(), total, n, err)
			}
			if want := "invalid --max-unavailable " + strconv.Quote(v.String()) + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %q does not start with %q", err, want)
			}
		} else if n < 0 {
			t.Fatalf("MaxUnavailableNodes(%s, %d) = %d, negative", v.String(), total, n)
		}
		if isInt {
			if (err == nil) != (i >= 0) || err == nil && n != int(i) {
				t.Fatalf("MaxUnavailableNodes(%d, %d) = %d, %v; want %d for a non-negative count, an error otherwise", i, total, n, err, i)
			}
			return
		}
		digits, isPercent := strings.CutSuffix(s, "%")
		percent, perr := strconv.Atoi(digits)
		if !isPercent || perr != nil {
			if err == nil {
				t.Fatalf("MaxUnavailableNodes(%q) = %d, want an error for a string that is not a percentage", s, n)
			}
			return
		}
		if total == 0 {
			return // never used: the node being maintained exists, so there is at least one
		}
		if percent < 0 {
			if err == nil || !strings.HasSuffix(err.Error(), "must not be negative") {
				t.Fatalf("MaxUnavailableNodes(%q, %d) = %d, %v; want the error for a negative percentage", s, total, n, err)
			}
			return
		}
		// A non-negative percentage is always a limit, however large.
		if err != nil || n < 1 {
			t.Fatalf("MaxUnavailableNodes(%q, %d) = %d, %v; want at least one node", s, total, n, err)
		}
		// Below 2^50 the float arithmetic of intstr rounds down exactly.
		if exact := new(big.Int).Mul(big.NewInt(int64(percent)), big.NewInt(int64(total))); exact.Cmp(big.NewInt(1<<50)) < 0 {
			if want := max(1, int(floorPercent(percent, total).Int64())); n != want {
				t.Fatalf("MaxUnavailableNodes(%q, %d) = %d, want %d (%d%% of %d rounded down, at least one)", s, total, n, want, percent, total)
			}
		}
		if percent <= 100 && n > total || percent >= 100 && n < total {
			t.Fatalf("MaxUnavailableNodes(%q, %d) = %d, not what %d%% of all nodes allows", s, total, n, percent)
		}
		// One more node never lowers the limit.
		if more, err := MaxUnavailableNodes(&v, total+1); err != nil || more < n {
			t.Fatalf("MaxUnavailableNodes(%q, %d) = %d, %v: below %d for one node fewer", s, total+1, more, err, n)
		}
	})
}
