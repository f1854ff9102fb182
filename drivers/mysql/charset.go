package mysql

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
)

// With interpolateParams, go-sql-driver writes each parameter into the
// statement text and escapes a quote in it with a backslash (0x5c). In
// big5, cp932, gb18030, gbk and sjis, 0x5c can also be the second byte of
// a two-byte character: the server, reading the statement in the
// connection's character set, takes 0xbf 0x5c as one character and the
// quote after it as the end of the literal, and the rest of the parameter
// runs as SQL. So interpolation is allowed only in character sets where
// that cannot happen: single-byte ones, and multibyte ones whose every
// byte after the first is 0x80 or above (UTF-8, EUC-JP, EUC-KR, GB2312;
// measured on MariaDB 10.11: big5, cp932, gbk and sjis each have
// characters ending in 0x5c, the others listed here none). A set not
// listed, such as gb18030, is refused with interpolation; without it
// (interpolateParams=false) the server receives parameters apart from the
// statement, and any character set is safe.
var interpolationSafe = map[string]bool{
	"utf8mb4": true, "utf8mb3": true, "utf8": true,
	"ujis": true, "eucjpms": true, "euckr": true, "gb2312": true,
	"binary": true, "ascii": true, "latin1": true, "latin2": true, "latin5": true, "latin7": true,
	"armscii8": true, "cp1250": true, "cp1251": true, "cp1256": true, "cp1257": true,
	"cp850": true, "cp852": true, "cp866": true, "dec8": true, "geostd8": true, "greek": true,
	"hebrew": true, "hp8": true, "keybcs2": true, "koi8r": true, "koi8u": true,
	"macce": true, "macroman": true, "swe7": true, "tis620": true,
}

// defaultCharset and defaultCollation are the connection's character set
// when the URL names none: what go-sql-driver's handshake asks for, set
// again with SET NAMES so that a server ignoring the handshake's choice
// (skip-character-set-client-handshake) cannot leave a default unsafe
// for interpolation.
const (
	defaultCharset   = "utf8mb4"
	defaultCollation = "utf8mb4_general_ci"
)

// checkCharset refuses a URL whose client character set makes
// interpolating parameters unsafe, unless it turns interpolation off. q is
// the URL's query; it runs before go-sql-driver reads it, so that every
// such URL gets the same error. Names are compared ignoring case, as the
// server compares variable names: ?CHARACTER_SET_CLIENT=gbk is the same
// SET as ?character_set_client=gbk. Every value of every spelling is
// checked, not only the one go-sql-driver would keep. This only gives the
// early, clear error: the session itself is checked after connecting
// (sessionCheck), whatever set it.
func checkCharset(q url.Values) error {
	if !interpolates(q) {
		return nil // parameters travel apart from the statement
	}
	type choice struct{ where, charset string }
	var chosen []choice
	for name, vs := range q {
		for _, v := range vs {
			switch strings.ToLower(name) {
			case "charset":
				for _, cs := range splitNames(v) {
					chosen = append(chosen, choice{name + "=" + cs, cs})
				}
			case "collation":
				if v != "" {
					chosen = append(chosen, choice{name + "=" + v, collationCharset(v)})
				}
			case "character_set_client":
				chosen = append(chosen, choice{name + "=" + v, normalName(v)})
			}
		}
	}
	slices.SortFunc(chosen, func(a, b choice) int { return strings.Compare(a.where, b.where) })
	for _, c := range chosen {
		if !interpolationSafe[c.charset] {
			return unsafeCharsetError(c.where, c.charset)
		}
	}
	return nil
}

func unsafeCharsetError(where, charset string) error {
	return fmt.Errorf("%s is unsafe with client-side parameter interpolation (interpolateParams): "+
		"in big5, cp932, gb18030, gbk and sjis a backslash byte can end a character, so an escaped quote "+
		"in a parameter ends its string literal (SQL injection); use charset=utf8mb4, or add "+
		"interpolateParams=false to keep %s with server-side prepared statements", where, charset)
}

// interpolates reports whether go-sql-driver will interpolate parameters
// for query q: bq turns it on unless the URL says interpolateParams=false,
// spelled exactly so (go-sql-driver's own parameter names are
// case-sensitive; another spelling is sent to the server as a SET, which
// fails).
func interpolates(q url.Values) bool {
	if !q.Has("interpolateParams") {
		return true
	}
	on, err := strconv.ParseBool(lastValue(q, "interpolateParams"))
	return err != nil || on
}

// sessionVariables lowercases the names of the session variables a URL
// sets (the server ignores their case) so that bq's own lookups see every
// spelling, and refuses a variable set twice in different spellings:
// go-sql-driver would send both in an order no one chose.
func sessionVariables(params map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(params))
	spelled := make(map[string]string, len(params))
	for name, v := range params {
		low := strings.ToLower(name)
		if prev, ok := spelled[low]; ok {
			a, b := min(prev, name), max(prev, name)
			return nil, fmt.Errorf("the session variable %s is set twice, as %s and %s: keep one", low, a, b)
		}
		spelled[low] = name
		out[low] = v
	}
	return out, nil
}

// setDefaultCharset gives cfg utf8mb4 when the URL names no character
// set or collation.
func setDefaultCharset(cfg *gomysql.Config, q url.Values) error {
	if q.Has("charset") || q.Has("collation") {
		return nil
	}
	if err := cfg.Apply(gomysql.Charset(defaultCharset, defaultCollation)); err != nil {
		return fmt.Errorf("set the connection character set: %w", err)
	}
	return nil
}

// collationCharset is the character set a collation belongs to: its name
// up to the first underscore ("gbk_chinese_ci", "binary").
func collationCharset(collation string) string {
	cs, _, _ := strings.Cut(normalName(collation), "_")
	return cs
}

// splitNames reads a comma-separated list of character set names as
// go-sql-driver's charset parameter takes it, or a session variable's
// value, quoted or not.
func splitNames(s string) []string {
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		if n := normalName(name); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func normalName(s string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(s), "'\"`"))
}

// lastValue is the value go-sql-driver takes for a repeated parameter.
func lastValue(q url.Values, key string) string {
	if v := q[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}
