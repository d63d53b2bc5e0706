module github.com/claudectl/claudectl

go 1.26.0

require (
	github.com/goccy/go-json v0.12.0
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.49.0 // indirect
