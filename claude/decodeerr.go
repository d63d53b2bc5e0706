package claude

// DecodeErrorOf reports why m did not decode strictly, as the decoder
// classified it, without parsing anything again:
//
//   - a known message that decoded only on the tolerant path (fields that
//     did not fit were coerced or dropped) returns the strict decoder's
//     error, and recovered is true;
//   - an *UnknownMessage of a known type that failed even tolerantly
//     returns its Err, and recovered is false;
//   - anything else (including an *UnknownMessage of an unknown type)
//     returns nil.
//
// The error's Line holds at most 200 bytes of the line.
func DecodeErrorOf(m Message) (err *DecodeError, recovered bool) {
	if u, ok := m.(*UnknownMessage); ok {
		de, _ := u.Err.(*DecodeError)
		return de, false
	}
	if m == nil {
		return nil, false
	}
	if e := m.base().strictErr; e != nil {
		return e, true
	}
	return nil, false
}
