package engine

import (
	"errors"

	"github.com/sluicehq/sluice/ports"
)

func isNotFound(err error) bool { return errors.Is(err, ports.ErrNotFound) }
