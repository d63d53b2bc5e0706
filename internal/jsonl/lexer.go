package jsonl

// lexState is where the truncator's JSON lexer is in the grammar. The
// lexer follows encoding/json's scanner, so that the lines it accepts are
// exactly those json.Valid accepts.
type lexState uint8

const (
	sValue      lexState = iota // a value is expected: start, after ':', after ',' in an array
	sValueOrEnd                 // after '[': a value or ']'
	sKeyOrEnd                   // after '{': a key or '}'
	sKey                        // after ',' in an object: a key
	sColon                      // after a key
	sCommaOrEnd                 // after a value inside a container
	sDone                       // the top-level value is complete
	sString                     // in a string
	sEscape                     // after '\' in a string
	sHex                        // in the four hex digits of \uXXXX
	sNeg                        // after the '-' of a number
	sZero                       // after a leading '0'
	sInt                        // in the integer digits
	sDot                        // after the '.'
	sFrac                       // in the fraction digits
	sExp                        // after 'e' or 'E'
	sExpSign                    // after the exponent's sign
	sExpDigits                  // in the exponent digits
	sLiteral                    // in true, false or null
	sError                      // not JSON
)

// maxDepth is the deepest nesting accepted, as in encoding/json.
const maxDepth = 10000

// capMode says which token of a top-level member is being captured.
type capMode uint8

const (
	capNone capMode = iota
	capKey
	capValue
)

// lexer is the state of the JSON lexer. It also captures the top-level
// scalar members, for the fallback object.
type lexer struct {
	st     lexState
	stack  []byte // open containers: '{' or '['
	inKey  bool   // the current string is an object key
	lit    string // the literal being read
	litPos int
	hexN   int
	hexVal int

	capMode capMode
	key     []byte // raw content of the last top-level key
	val     []byte // raw text of the current top-level scalar value
	keyOK   bool   // key is complete and short enough
	valOK   bool
	fields  fieldSet
}

func (l *lexer) init() {
	l.fields.limit = fieldsLimit
}

// complete reports whether the input lexed so far is a whole JSON value.
func (l *lexer) complete() bool {
	switch l.st {
	case sDone:
		return true
	case sZero, sInt, sFrac, sExpDigits:
		return len(l.stack) == 0 // a top-level number ends with the input
	}
	return false
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// step lexes one byte and copies it to the output as needed. Runs of plain
// string content do not come here (see stringRun). On a byte that is not
// valid JSON, step calls fail without consuming it.
func (t *truncator) step(c byte) {
	switch t.st {
	case sValue, sValueOrEnd:
		switch {
		case isJSONSpace(c):
			t.emit(c)
		case c == ']' && t.st == sValueOrEnd:
			t.closeContainer(c)
		default:
			t.beginValue(c)
		}
	case sKeyOrEnd, sKey:
		switch {
		case isJSONSpace(c):
			t.emit(c)
		case c == '"':
			t.beginString(true)
		case c == '}' && t.st == sKeyOrEnd:
			t.closeContainer(c)
		default:
			t.fail()
		}
	case sColon:
		switch {
		case isJSONSpace(c):
			t.emit(c)
		case c == ':':
			t.emit(c)
			t.st = sValue
		default:
			t.fail()
		}
	case sCommaOrEnd:
		top := t.stack[len(t.stack)-1]
		switch {
		case isJSONSpace(c):
			t.emit(c)
		case c == ',':
			t.emit(c)
			if top == '{' {
				t.st = sKey
			} else {
				t.st = sValue
			}
		case c == '}' && top == '{', c == ']' && top == '[':
			t.closeContainer(c)
		default:
			t.fail()
		}
	case sDone:
		if isJSONSpace(c) {
			t.emit(c)
		} else {
			t.fail()
		}
	case sString:
		switch c {
		case '"':
			t.endString()
		case '\\':
			t.backslash()
			t.st = sEscape
		default:
			t.fail() // a control character
		}
	case sEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			t.stringByte(c)
			t.st = sString
		case 'u':
			t.stringByte(c)
			t.st = sHex
			t.hexN, t.hexVal = 0, 0
		default:
			t.fail()
		}
	case sHex:
		d := hexValue(c)
		if d < 0 {
			t.fail()
			return
		}
		t.stringByte(c)
		t.hexVal = t.hexVal<<4 | d
		t.hexN++
		if t.hexN == 4 {
			t.st = sString
			t.surr = t.pairRoom && 0xD800 <= t.hexVal && t.hexVal < 0xDC00
		}
	case sNeg:
		switch {
		case c == '0':
			t.scalarByte(c, sZero)
		case '1' <= c && c <= '9':
			t.scalarByte(c, sInt)
		default:
			t.fail()
		}
	case sZero, sInt, sFrac, sExpDigits:
		switch {
		case isDigit(c) && t.st != sZero:
			t.scalarByte(c, t.st)
		case c == '.' && (t.st == sZero || t.st == sInt):
			t.scalarByte(c, sDot)
		case (c == 'e' || c == 'E') && t.st != sExpDigits:
			t.scalarByte(c, sExp)
		default:
			t.endValue()
			t.step(c)
		}
	case sDot:
		if isDigit(c) {
			t.scalarByte(c, sFrac)
		} else {
			t.fail()
		}
	case sExp:
		switch {
		case c == '+' || c == '-':
			t.scalarByte(c, sExpSign)
		case isDigit(c):
			t.scalarByte(c, sExpDigits)
		default:
			t.fail()
		}
	case sExpSign:
		if isDigit(c) {
			t.scalarByte(c, sExpDigits)
		} else {
			t.fail()
		}
	case sLiteral:
		if c != t.lit[t.litPos] {
			t.fail()
			return
		}
		t.scalarByte(c, sLiteral)
		t.litPos++
		if t.litPos == len(t.lit) {
			t.endValue()
		}
	default:
		t.fail()
	}
}

func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// topMember reports whether a value starting now is a member of the
// top-level object.
func (t *truncator) topMember() bool {
	return len(t.stack) == 1 && t.stack[0] == '{'
}

func (t *truncator) beginValue(c byte) {
	switch {
	case c == '{':
		t.openContainer(c, sKeyOrEnd)
	case c == '[':
		t.openContainer(c, sValueOrEnd)
	case c == '"':
		t.beginString(false)
	case c == '-':
		t.beginScalar(c, sNeg)
	case c == '0':
		t.beginScalar(c, sZero)
	case '1' <= c && c <= '9':
		t.beginScalar(c, sInt)
	case c == 't':
		t.lit = "true"
		t.beginScalar(c, sLiteral)
	case c == 'f':
		t.lit = "false"
		t.beginScalar(c, sLiteral)
	case c == 'n':
		t.lit = "null"
		t.beginScalar(c, sLiteral)
	default:
		t.fail()
	}
}

func (t *truncator) beginScalar(c byte, next lexState) {
	if t.topMember() {
		t.capMode = capValue
		t.val = t.val[:0]
		t.valOK = true
	}
	t.litPos = 1
	t.scalarByte(c, next)
}

// scalarByte copies a byte of a number or literal and moves to next.
func (t *truncator) scalarByte(c byte, next lexState) {
	t.captureByte(c)
	t.emit(c)
	t.st = next
}

func (t *truncator) openContainer(c byte, next lexState) {
	if len(t.stack) >= maxDepth {
		t.fail()
		return
	}
	t.emit(c)
	t.stack = append(t.stack, c)
	t.st = next
}

func (t *truncator) closeContainer(c byte) {
	t.emit(c)
	t.stack = t.stack[:len(t.stack)-1]
	t.endValue()
}

func (t *truncator) beginString(isKey bool) {
	t.inKey = isKey
	if t.topMember() {
		if isKey {
			t.capMode = capKey
			t.key = t.key[:0]
			t.keyOK = true
		} else {
			t.capMode = capValue
			t.val = append(t.val[:0], '"')
			t.valOK = true
		}
	}
	t.openString()
	t.st = sString
}

func (t *truncator) endString() {
	if t.capMode == capKey {
		t.capMode = capNone
	} else {
		t.captureByte('"')
	}
	t.closeString()
	if t.inKey {
		t.st = sColon
	} else {
		t.endValue()
	}
}

// endValue follows a complete value.
func (t *truncator) endValue() {
	if t.capMode == capValue {
		t.capMode = capNone
		if t.keyOK && t.valOK {
			t.fields.add(t.key, t.val)
		}
	}
	if len(t.stack) == 0 {
		t.st = sDone
	} else {
		t.st = sCommaOrEnd
	}
}

// captureRun adds string content to the token being captured, giving up
// on tokens longer than maxStringKeep.
func (t *truncator) captureRun(run []byte) {
	switch t.capMode {
	case capKey:
		if t.keyOK {
			t.keyOK = len(t.key)+len(run) <= maxStringKeep
			if t.keyOK {
				t.key = append(t.key, run...)
			}
		}
	case capValue:
		if t.valOK {
			t.valOK = len(t.val)+len(run) <= maxStringKeep+2 // with the quotes
			if t.valOK {
				t.val = append(t.val, run...)
			}
		}
	}
}

func (t *truncator) captureByte(c byte) {
	if t.capMode != capNone {
		t.captureRun([]byte{c})
	}
}
