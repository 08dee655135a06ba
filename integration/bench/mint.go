package main

import (
	"errors"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// onEveryCore runs f(0) … f(n-1) spread over every core, and returns
// the first error of each worker.
func onEveryCore(n int, f func(i int) error) error {
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := f(i); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// mintPool writes n fresh VC-JWTs of tmpl (each its own jti), one a line,
// minted on every core. It returns the size of one token.
func mintPool(path string, n int, issuer party, tmpl vc.Template) (int, error) {
	tokens := make([]string, n)
	err := onEveryCore(n, func(i int) (err error) {
		tokens[i], err = vc.IssueJWT(issuer.key, issuer.kid, tmpl)
		return err
	})
	if err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	for _, t := range tokens {
		if _, err := io.WriteString(f, t+"\n"); err != nil {
			f.Close()
			return 0, err
		}
	}
	return len(tokens[0]), f.Close()
}
