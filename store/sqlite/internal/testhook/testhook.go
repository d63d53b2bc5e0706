// Package testhook lets package sqlitetest reach into a sqlite.DB without
// the DB exporting anything: package sqlite fills in the functions here
// when it is initialised.
package testhook

// Fill makes db (a *sqlite.DB) refuse to grow (on) or lets it grow again
// (off). Set by package sqlite.
var Fill func(db any, on bool) error
