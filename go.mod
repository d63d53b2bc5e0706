module github.com/claudectl/claudectl

go 1.26
